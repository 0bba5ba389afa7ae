/**
 * fast-check as every property test imports it: with one fixed seed, so each run draws the same cases and a
 * verdict never depends on the run. A failure's report prints the seed and the path of the shrunk case;
 * `fc.assert(property, { seed, path })` replays it. A property that should explore other cases gets more
 * `numRuns`, not another seed per run.
 */
import fc from "fast-check";

export const PROPERTY_SEED = 57;

fc.configureGlobal({ seed: PROPERTY_SEED });

export default fc;
