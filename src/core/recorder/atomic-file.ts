import { open, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";

/**
 * Writes `finalPath` through `<finalPath>.tmp`: chunks are appended to the tmp file, which is fsynced and
 * renamed only after `produce` finishes, so readers never see a partial final file.
 */
export async function writeFileAtomically(
  finalPath: string,
  produce: (write: (chunk: string) => Promise<void>) => Promise<void>,
): Promise<void> {
  const tmpPath = `${finalPath}.tmp`;
  const handle = await open(tmpPath, "w");
  try {
    await produce(async (chunk) => {
      await handle.writeFile(chunk, "utf8");
    });
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(tmpPath, { force: true });
    throw error;
  }
  await handle.close();
  await rename(tmpPath, finalPath);
  await fsyncDirectory(dirname(finalPath));
}

// Makes a rename durable, not just the file's contents.
export async function fsyncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
