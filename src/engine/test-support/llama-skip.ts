import { isNativeAvailable } from "../native/llama-native.js";

/** Why the llama-backed tests cannot run here, or false. */
export const llamaSkip: string | false =
  process.platform === "linux" && process.arch === "x64" && isNativeAvailable()
    ? false
    : "no llama.cpp addon on this platform";
