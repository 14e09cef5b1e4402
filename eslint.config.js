// Lint rules that hold the architecture: decide/ is pure (no I/O, no clock, no client),
// only cluster/ talks to @kubernetes/client-node at runtime, and src/ never imports test/.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const ioModules = [
  'node:fs',
  'node:fs/promises',
  'node:http',
  'node:https',
  'node:net',
  'node:child_process',
  'isomorphic-git',
  'prom-client',
  'pino',
];

export default tseslint.config(
  { ignores: ['node_modules/**', '.cache/**', 'dist/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: false } },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      '@typescript-eslint/consistent-type-imports': 'error',
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/test/**', '../../test/*'], message: 'src/ never imports test/.' },
          ],
        },
      ],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/cluster/**', 'src/cli/**', 'src/main.ts', 'src/**/types.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: '@kubernetes/client-node',
              message: 'Only src/cluster/ talks to the API (type-only imports are fine).',
              allowTypeImports: true,
            },
          ],
          patterns: [{ group: ['**/test/**'], message: 'src/ never imports test/.' }],
        },
      ],
    },
  },
  {
    files: ['src/decide/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [...ioModules, '@kubernetes/client-node'].map((name) => ({
            name,
            message: 'decide/ is pure: no I/O, no client. Pass data in.',
          })),
          patterns: [
            {
              group: ['**/cluster/*', '**/dispatch/*', '**/audit/*', '**/observe/*', '**/loops/*'],
              message: 'decide/ imports only pure modules.',
            },
          ],
        },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'decide/ takes time as an argument.' },
        { object: 'Math', property: 'random', message: 'decide/ is deterministic.' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'decide/ takes time as an argument.',
        },
      ],
    },
  },
);
