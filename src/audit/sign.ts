/**
 * SSH commit signing (git's `gpg.format = ssh`), with node:crypto only: an Ed25519
 * key (OpenSSH "BEGIN OPENSSH PRIVATE KEY" unencrypted, or PKCS#8 PEM) signs the commit
 * payload as an SSHSIG blob in namespace "git", armored as "BEGIN SSH SIGNATURE", which
 * `git verify-commit` checks against an allowed-signers file.
 *
 * Not supported (clear errors): encrypted keys (mount the key decrypted from a Secret),
 * RSA/ECDSA keys, and GPG keys (that would need openpgp, a large dependency).
 */
import { createHash, createPrivateKey, sign, type KeyObject } from 'node:crypto';

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
