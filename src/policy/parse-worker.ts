/**
 * The worker-thread side of `parse-off-thread.ts`: parses the policy files it is given
 * and posts back plain documents and errors. It holds no state; one worker per parse.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { parsePolicyFile } from './parse.ts';
import type { ParseJob, ParseJobResult } from './parse-off-thread.ts';

const job = workerData as ParseJob;
const result: ParseJobResult = { documents: [], errors: [], tokens: 0 };
for (const file of job.files) {
  const parsed = parsePolicyFile(file.path, file.content);
  result.documents.push(...parsed.documents);
  result.errors.push(...parsed.errors);
  result.tokens += parsed.work.tokens;
}
parentPort?.postMessage(result);
