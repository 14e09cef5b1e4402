/**
 * SSH commit signing (git's `gpg.format = ssh`), with node:crypto only: an Ed25519
 * key (OpenSSH "BEGIN OPENSSH PRIVATE KEY" unencrypted, or PKCS#8 PEM) signs the commit
 * payload as an SSHSIG blob in namespace "git", armored as "BEGIN SSH SIGNATURE", which
 * `git verify-commit` checks against an allowed-signers file.
 *
 * Not supported (clear errors): encrypted keys (mount the key decrypted from a Secret),
 * RSA/ECDSA keys, and GPG keys (that would need openpgp, a large dependency).
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';

export interface SshSigner {
  /** "ssh-ed25519 AAAA..." for the allowed-signers file. */
  readonly publicKey: string;
  sign(payload: string): string;
}

function sshString(data: Buffer | string): Buffer {
  const body = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(body.length);
  return Buffer.concat([length, body]);
}

class Reader {
  #buffer: Buffer;
  #offset = 0;
  constructor(buffer: Buffer) {
    this.#buffer = buffer;
  }
  uint32(): number {
    if (this.#offset + 4 > this.#buffer.length) throw new Error('truncated key');
    const value = this.#buffer.readUInt32BE(this.#offset);
    this.#offset += 4;
    return value;
  }
  bytes(): Buffer {
    const length = this.uint32();
    if (this.#offset + length > this.#buffer.length) throw new Error('truncated key');
    const value = this.#buffer.subarray(this.#offset, this.#offset + length);
    this.#offset += length;
    return value;
  }
  text(): string {
    return this.bytes().toString('utf8');
  }
}

const magic = Buffer.from('openssh-key-v1\0', 'utf8');

function parseOpenSsh(text: string, where: string): { key: KeyObject; publicKey: Buffer } {
  const base64 = text.replace(/-----(BEGIN|END) OPENSSH PRIVATE KEY-----/g, '').replace(/\s+/g, '');
  const raw = Buffer.from(base64, 'base64');
  if (!raw.subarray(0, magic.length).equals(magic))
    throw new Error(`${where}: not an OpenSSH private key`);
  const reader = new Reader(raw.subarray(magic.length));
  const cipher = reader.text();
  reader.text(); // kdf name
  reader.bytes(); // kdf options
  if (cipher !== 'none')
    throw new Error(
      `${where}: the key is encrypted (${cipher}); give an unencrypted key (from a Secret)`,
    );
  if (reader.uint32() !== 1) throw new Error(`${where}: exactly one key expected`);
  reader.bytes(); // public key blob
  const secret = new Reader(reader.bytes());
  if (secret.uint32() !== secret.uint32())
    throw new Error(`${where}: check bytes differ (corrupt key)`);
  const type = secret.text();
  if (type !== 'ssh-ed25519')
    throw new Error(`${where}: key type ${type} is not supported; use an ed25519 key`);
  const publicKey = secret.bytes();
  const privateKey = secret.bytes();
  const key = createPrivateKey({
    key: {
      kty: 'OKP',
      crv: 'Ed25519',
      d: privateKey.subarray(0, 32).toString('base64url'),
      x: publicKey.toString('base64url'),
    },
    format: 'jwk',
  });
  return { key, publicKey };
}

function parsePkcs8(text: string, where: string): { key: KeyObject; publicKey: Buffer } {
  let key: KeyObject;
  try {
    key = createPrivateKey(text);
  } catch (error) {
    throw new Error(`${where}: not a readable private key: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (key.asymmetricKeyType !== 'ed25519')
    throw new Error(
      `${where}: key type ${key.asymmetricKeyType} is not supported; use an ed25519 key`,
    );
  const jwk = key.export({ format: 'jwk' });
  return { key, publicKey: Buffer.from(jwk.x as string, 'base64url') };
}

/** `where` names the file or Secret the key came from, for errors. */
export function sshSigner(privateKeyText: string, where = 'signing key'): SshSigner {
  const { key, publicKey } = privateKeyText.includes('OPENSSH PRIVATE KEY')
    ? parseOpenSsh(privateKeyText, where)
    : parsePkcs8(privateKeyText, where);
  const publicBlob = Buffer.concat([sshString('ssh-ed25519'), sshString(publicKey)]);
  return {
    publicKey: `ssh-ed25519 ${publicBlob.toString('base64')}`,
    sign(payload: string): string {
      const digest = createHash('sha512').update(payload, 'utf8').digest();
      const signed = Buffer.concat([
        Buffer.from('SSHSIG'),
        sshString('git'),
        sshString(''),
        sshString('sha512'),
        sshString(digest),
      ]);
      const signature = sign(null, signed, key);
      const version = Buffer.alloc(4);
      version.writeUInt32BE(1);
      const blob = Buffer.concat([
        Buffer.from('SSHSIG'),
        version,
        sshString(publicBlob),
        sshString('git'),
        sshString(''),
        sshString('sha512'),
        sshString(Buffer.concat([sshString('ssh-ed25519'), sshString(signature)])),
      ]);
      const lines = blob.toString('base64').match(/.{1,70}/g) ?? [];
      return `-----BEGIN SSH SIGNATURE-----\n${lines.join('\n')}\n-----END SSH SIGNATURE-----\n`;
    },
  };
}

/** One line of an allowed-signers file (git's `gpg.ssh.allowedSignersFile`, the subset tollgate checks). */
export interface AllowedSigner {
  readonly principals: string;
  /** "ssh-ed25519 AAAA..." */
  readonly publicKey: string;
  /** From a `namespaces="..."` option; undefined = any namespace. */
  readonly namespaces?: readonly string[];
}

/**
 * Parses an allowed-signers file: `principals [options] keytype base64-key [comment]`,
 * `#` comments and blank lines skipped. Only ssh-ed25519 keys can match tollgate's
 * signatures; other key types are kept out with an error naming the line, so a trust
 * list never silently trusts nothing.
 */
export function parseAllowedSigners(text: string, where = 'allowed signers'): AllowedSigner[] {
  const signers: AllowedSigner[] = [];
  for (const [index, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match =
      /^(\S+)\s+(?:(\S*=\S*|\S+(?:,\S+)*)\s+)?(ssh-\S+|ecdsa-\S+|sk-\S+)\s+([A-Za-z0-9+/=]+)/.exec(
        line,
      );
    if (!match)
      throw new Error(`${where}:${index + 1}: expected "principals [options] keytype key"`);
    const [, principals, options, type, key] = match as unknown as [
      string,
      string,
      string | undefined,
      string,
      string,
    ];
    if (type !== 'ssh-ed25519')
      throw new Error(
        `${where}:${index + 1}: key type ${type} is not supported; tollgate signs with ssh-ed25519`,
      );
    const namespaces = /namespaces="([^"]*)"/.exec(options ?? '')?.[1];
    signers.push({
      principals,
      publicKey: `${type} ${key}`,
      ...(namespaces === undefined ? {} : { namespaces: namespaces.split(',') }),
    });
  }
  return signers;
}

export type SignatureCheck =
  | { readonly ok: true; readonly principals: string }
  | { readonly ok: false; readonly reason: string };

/**
 * Verifies an armored SSHSIG over `payload` (namespace "git", as `git verify-commit`
 * does) and that its key is in `allowed`. Pure node:crypto.
 */
export function verifySshSignature(
  armored: string,
  payload: string,
  allowed: readonly AllowedSigner[],
): SignatureCheck {
  const body = armored.replace(/-----(BEGIN|END) SSH SIGNATURE-----/g, '').replace(/\s+/g, '');
  let blob: Buffer;
  try {
    blob = Buffer.from(body, 'base64');
  } catch {
    return { ok: false, reason: 'signature is not base64' };
  }
  if (!blob.subarray(0, 6).equals(Buffer.from('SSHSIG')))
    return { ok: false, reason: 'not an SSH signature (a GPG signature?)' };
  try {
    const reader = new Reader(blob.subarray(6));
    if (reader.uint32() !== 1) return { ok: false, reason: 'unknown SSHSIG version' };
    const publicBlob = reader.bytes();
    const namespace = reader.text();
    reader.bytes(); // reserved
    const hashAlgorithm = reader.text();
    const signatureBlob = new Reader(reader.bytes());
    const keyReader = new Reader(publicBlob);
    const keyType = keyReader.text();
    const publicKey = `${keyType} ${publicBlob.toString('base64')}`;
    if (namespace !== 'git')
      return { ok: false, reason: `signature namespace is "${namespace}", not "git"` };
    const signer = allowed.find(
      (entry) =>
        entry.publicKey === publicKey && (!entry.namespaces || entry.namespaces.includes('git')),
    );
    if (!signer)
      return {
        ok: false,
        reason: `signing key ${publicKey.slice(0, 40)}… is not in the allowed signers`,
      };
    if (keyType !== 'ssh-ed25519' || signatureBlob.text() !== 'ssh-ed25519')
      return { ok: false, reason: `key type ${keyType} is not supported` };
    if (hashAlgorithm !== 'sha512' && hashAlgorithm !== 'sha256')
      return { ok: false, reason: `hash ${hashAlgorithm} is not supported` };
    const signature = signatureBlob.bytes();
    const digest = createHash(hashAlgorithm).update(payload, 'utf8').digest();
    const signed = Buffer.concat([
      Buffer.from('SSHSIG'),
      sshString('git'),
      sshString(''),
      sshString(hashAlgorithm),
      sshString(digest),
    ]);
    const key = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: keyReader.bytes().toString('base64url') },
      format: 'jwk',
    });
    if (!verify(null, signed, key, signature))
      return {
        ok: false,
        reason: 'signature does not match the commit (content changed after signing)',
      };
    return { ok: true, principals: signer.principals };
  } catch (error) {
    return { ok: false, reason: `unreadable signature: ${(error as Error).message}` };
  }
}
