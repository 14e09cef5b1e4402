/**
 * Image references compared the way a container runtime resolves them: "nginx" is
 * "docker.io/library/nginx:latest", a reference with a digest matches by digest alone,
 * and a node's `status.images[].names` lists both `repo@sha256:...` and `repo:tag` forms.
 */

export interface ImageRef {
  readonly repository: string; // registry/path, normalised
  readonly tag?: string;
  readonly digest?: string;
}

export function normaliseImage(reference: string): ImageRef {
  let rest = reference.trim();
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
  }
  let tag: string | undefined;
  const lastSlash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  const firstSlash = rest.indexOf('/');
  const first = firstSlash < 0 ? '' : rest.slice(0, firstSlash);
  const hasRegistry = first.includes('.') || first.includes(':') || first === 'localhost';
  let repository = hasRegistry ? rest : `docker.io/${rest}`;
  if (repository.startsWith('docker.io/') && !repository.slice('docker.io/'.length).includes('/')) {
    repository = `docker.io/library/${repository.slice('docker.io/'.length)}`;
  }
  if (repository.startsWith('index.docker.io/'))
    repository = `docker.io/${repository.slice('index.docker.io/'.length)}`;
  if (!digest && !tag) tag = 'latest';
  return digest
    ? { repository, digest, ...(tag ? { tag } : {}) }
    : { repository, tag: tag as string };
}

/** Whether a name a node reports satisfies what a pod asks for. */
export function imageMatches(wanted: ImageRef, present: ImageRef): boolean {
  if (wanted.repository !== present.repository) return false;
  if (wanted.digest) return present.digest === wanted.digest;
  return present.tag === wanted.tag;
}
