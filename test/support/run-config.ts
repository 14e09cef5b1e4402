/**
 * `tollgate run`'s configuration parsed from the fewest flags it accepts plus the given
 * ones, with a file system that has only /kubeconfig: what the run-config unit tests share.
 */
import {
  parseRunConfig,
  type RawRunSettings,
  type RunConfigContext,
} from '../../src/cli/run-config.ts';

const context = (env: Record<string, string>): RunConfigContext => ({
  env,
  hostname: 'tollgate-0',
  isFile: (path) => path === '/kubeconfig',
  isDirectory: () => false,
});

export const minimalRunSettings: RawRunSettings = {
  kubeconfig: '/kubeconfig',
  policyRepo: 'https://git.example/platform/policy.git',
};

export function parseWithMinimal(flags: RawRunSettings, env: Record<string, string> = {}) {
  return parseRunConfig({ ...minimalRunSettings, ...flags }, context(env));
}
