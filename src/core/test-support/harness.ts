export { checkScheduler as testScheduler, linearStepTimeS } from "../check-scheduler.js";
