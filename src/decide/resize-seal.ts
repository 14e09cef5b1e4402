/**
 * Sealed resize state: the resize annotations on a pod are written by tollgate but
 * editable by anyone with pod patch, so each one carries an HMAC-SHA256 over the pod's
 * uid, the annotation's name and its JSON value, keyed by a secret from the run
 * configuration. A value is honoured only when its seal verifies under a key tollgate
 * holds; binding the uid and the name means a state copied from another pod, or moved
 * from one annotation to another, does not verify either.
 *
 * Format: `v1.<key id>.<mac, base64url>.<JSON>`. The key id (a hash prefix of the key)
 * names which key sealed it, so keys can rotate: the first key of the ring seals, every
 * key verifies. What a seal does not stop: replaying an older value tollgate itself
 * sealed for the same pod (still clamped to the policy bounds, see resize-state.ts).
 *
 * HMAC is a pure function of its inputs, so this module stays in decide/.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export interface StateKey {
  /** A short public name of the key (a hash prefix), written beside each seal. */
  readonly id: string;
  readonly secret: Uint8Array;
}

/** The keys tollgate holds: `signing` seals new values; it and `verifying` open them. */
export interface StateKeyRing {
  readonly signing: StateKey;
  readonly verifying?: readonly StateKey[];
}

/** Why a stored value was not honoured: a closed set, the metric's `reason` label. */
export const stateRejections = ['unsigned', 'unknown-key', 'forged', 'corrupt'] as const;
export type StateRejection = (typeof stateRejections)[number];

export type Unsealed =
  | { readonly ok: true; readonly json: string }
  | { readonly ok: false; readonly reason: StateRejection; readonly detail: string };

const version = 'v1';

/** A key from its secret; its id is the first 12 hex digits of the secret's SHA-256. */
export function stateKey(secret: Uint8Array | string): StateKey {
  const bytes = typeof secret === 'string' ? new TextEncoder().encode(secret) : secret;
  return { id: createHash('sha256').update(bytes).digest('hex').slice(0, 12), secret: bytes };
}

/** A ring from secrets in order: the first seals, all verify. */
export function stateKeyRing(secrets: readonly (Uint8Array | string)[]): StateKeyRing {
  const [first, ...rest] = secrets.map(stateKey);
  if (!first) throw new Error('a resize state key ring needs at least one key');
  return { signing: first, verifying: rest };
}

function mac(key: StateKey, uid: string, annotation: string, json: string): Buffer {
  return createHmac('sha256', key.secret).update(`${uid}\n${annotation}\n${json}`).digest();
}

/** The annotation value that stores `json` for pod `uid`. */
export function seal(ring: StateKeyRing, uid: string, annotation: string, json: string): string {
  const tag = mac(ring.signing, uid, annotation, json).toString('base64url');
  return `${version}.${ring.signing.id}.${tag}.${json}`;
}

/** The JSON a sealed value holds, when its seal verifies; else why not. */
export function unseal(
  ring: StateKeyRing,
  uid: string,
  annotation: string,
  text: string,
): Unsealed {
  const parts = splitSealed(text);
  if (!parts) {
    return {
      ok: false,
      reason: 'unsigned',
      detail: `annotation ${annotation}: no tollgate seal (written by someone else, or before seals)`,
    };
  }
  const key = [ring.signing, ...(ring.verifying ?? [])].find((k) => k.id === parts.keyId);
  if (!key) {
    return {
      ok: false,
      reason: 'unknown-key',
      detail: `annotation ${annotation}: sealed with key ${parts.keyId}, which tollgate does not hold`,
    };
  }
  const expected = mac(key, uid, annotation, parts.json);
  const given = Buffer.from(parts.tag, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return {
      ok: false,
      reason: 'forged',
      detail: `annotation ${annotation}: the seal does not match this pod and value`,
    };
  }
  return { ok: true, json: parts.json };
}

/**
 * The JSON of a sealed value without checking its seal: for `tollgate plan`, which holds
 * no key and only previews. Never for a decision that writes.
 */
export function unverifiedJson(text: string): string {
  return splitSealed(text)?.json ?? text;
}

function splitSealed(text: string): { keyId: string; tag: string; json: string } | undefined {
  const match = /^v1\.([0-9a-z_-]+)\.([A-Za-z0-9_-]+)\.([\s\S]*)$/i.exec(text);
  if (!match) return undefined;
  const [, keyId = '', tag = '', json = ''] = match;
  return { keyId, tag, json };
}

/** Shortest key accepted: 32 characters (the HMAC-SHA256 key should carry 256 bits). */
export const minimumStateKeyLength = 32;

/**
 * The key ring from a key file's text: one key per line (blank lines and `#` comments
 * skipped), the first seals, all verify. A short key or an empty file is an error that
 * names the line.
 */
export function parseStateKeys(text: string): StateKeyRing | { readonly error: string } {
  const secrets: string[] = [];
  const lines = text.split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.length < minimumStateKeyLength)
      return {
        error: `line ${index + 1}: a key must be at least ${minimumStateKeyLength} characters`,
      };
    secrets.push(line);
  }
  if (secrets.length === 0) return { error: 'no key in the file' };
  return stateKeyRing(secrets);
}
