/**
 * The chart's SSH deploy key values (values.yaml `ssh`), rendered by the real
 * `helm template` (test/tools): the Secret of keys and known_hosts mounted read-only,
 * 0440 like the token (root's files read through the pod's fsGroup), tollgate pointed
 * at its files; without an audit key the policy key serves both; `git.secretName: ''`
 * drops the token Secret for an SSH-only install; nothing of it by default.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { helmTemplate, type Manifest } from './tools.ts';

interface Container {
  env?: { name: string; value?: string }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface PodSpec {
  containers: Container[];
  volumes?: { name: string; secret?: { secretName: string; defaultMode?: number } }[];
}

function podSpec(objects: Manifest[]): PodSpec {
  const workload = objects.find((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet');
  assert.ok(workload, 'a Deployment or StatefulSet');
  return (workload.spec as { template: { spec: PodSpec } }).template.spec;
}

function env(objects: Manifest[]): Record<string, string | undefined> {
  const container = podSpec(objects).containers[0] as Container;
  return Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]));
}

const sshVariables = [
  'TOLLGATE_GIT_SSH_KEY_FILE',
  'TOLLGATE_AUDIT_SSH_KEY_FILE',
  'TOLLGATE_GIT_SSH_KNOWN_HOSTS',
];

describe('the chart with SSH deploy keys', () => {
  it('mounts the key Secret read-only at 0440 and points tollgate at the policy key, the audit key and known_hosts', () => {
    const objects = helmTemplate({ set: ['ssh.enabled=true'] });
    const spec = podSpec(objects);
    const volume = spec.volumes?.find((v) => v.secret?.secretName === 'tollgate-git-ssh');
    assert.ok(volume, 'a volume of the Secret tollgate-git-ssh');
    assert.equal(volume.secret?.defaultMode, 0o440);
    const mount = spec.containers[0]?.volumeMounts?.find((m) => m.name === volume.name);
    assert.ok(mount?.readOnly, 'mounted read-only');
    assert.deepEqual(
      sshVariables.map((name) => env(objects)[name]),
      ['policy-key', 'audit-key', 'known_hosts'].map((file) => `${mount.mountPath}/${file}`),
    );
  });

  it('takes the Secret name and its keys from the values; without an audit key the policy key serves both', () => {
    const vars = env(
      helmTemplate({
        set: [
          'ssh.enabled=true',
          'ssh.secretName=forge-keys',
          'ssh.policyKey=id_ed25519',
          'ssh.auditKey=',
          'ssh.knownHosts=hosts',
        ],
      }),
    );
    assert.match(vars.TOLLGATE_GIT_SSH_KEY_FILE ?? '', /\/id_ed25519$/);
    assert.equal(vars.TOLLGATE_AUDIT_SSH_KEY_FILE, undefined);
    assert.match(vars.TOLLGATE_GIT_SSH_KNOWN_HOSTS ?? '', /\/hosts$/);
  });

  it("drops the token Secret for an SSH-only install (git.secretName: '')", () => {
    const objects = helmTemplate({ set: ['ssh.enabled=true', 'git.secretName='] });
    assert.equal(env(objects).TOLLGATE_GIT_TOKEN_FILE, undefined);
    assert.equal(
      podSpec(objects).volumes?.some((v) => v.secret?.secretName === 'tollgate-git'),
      false,
    );
  });

  it('with the persistent cache too', () => {
    const vars = env(helmTemplate({ set: ['ssh.enabled=true', 'persistence.enabled=true'] }));
    assert.ok(vars.TOLLGATE_GIT_SSH_KEY_FILE);
  });

  it('renders nothing of SSH by default, and keeps the token', () => {
    const vars = env(helmTemplate());
    for (const name of sshVariables) assert.equal(vars[name], undefined, name);
    assert.equal(vars.TOLLGATE_GIT_TOKEN_FILE, '/var/run/secrets/tollgate/git/token');
  });
});
