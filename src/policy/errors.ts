/**
 * A problem found in a policy repository. Every one names where it is (file, YAML
 * document, field path) and why, so a person can fix it from the message alone.
 */
export interface PolicyError {
  /** Path inside the policy folder, e.g. "tenants/ml-training.yaml". */
  readonly file: string;
  /** 0-based index of the YAML document in the file; absent for file-level problems. */
  readonly document?: number;
  /** Field path inside the document, e.g. "spec.conditions[1].minNodes"; "" for the whole document or file. */
  readonly path: string;
  readonly message: string;
  /** 1-based line and column of the field in the file, when found (locate.ts). */
  readonly line?: number;
  readonly column?: number;
}

/** One line per error: `file#doc path: message (line L, column C)`, as the CLI prints it. */
export function formatPolicyError(error: PolicyError): string {
  const where = error.document === undefined ? error.file : `${error.file}#${error.document}`;
  const at = error.line === undefined ? '' : ` (line ${error.line}, column ${error.column})`;
  return `${where}${error.path ? ` ${error.path}` : ''}: ${error.message}${at}`;
}

/** `["spec", "conditions", 1, "minNodes"]` -> `spec.conditions[1].minNodes`. */
export function fieldPath(parts: readonly (string | number)[]): string {
  let out = '';
  for (const part of parts) {
    if (typeof part === 'number') out += `[${part}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(part)) out += out ? `.${part}` : part;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out;
}
