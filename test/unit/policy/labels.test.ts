/**
 * Label keys, label values and selectors, checked as the API server checks them: the
 * good and bad values are those of k8s.io/apimachinery's own tests
 * (pkg/util/validation/validation_test.go, TestIsQualifiedName and
 * TestIsValidLabelValue) and metav1's selector rules, with the API server's messages.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  annotationKeyProblems,
  labelValueProblems,
  qualifiedNameProblems,
  selectorProblems,
} from '../../../src/policy/labels.ts';

describe('a label key (a qualified name)', () => {
  const accepted = [
    'simple',
    'now-with-dashes',
    '1-starts-with-num',
    '1234',
    'simple/simple',
    'now-with-dashes/simple',
    'now-with-dashes/now-with-dashes',
    'now.with.dots/now-with-dashes',
    'now-with.dashes-and.dots/now-with-dashes',
    '1-num.2-num/3-num',
    '1234/5678',
    '1.2.3.4/5678',
    'Uppercase_Is_OK_123',
    'example.com/Uppercase_Is_OK_123',
    'requests.storage-foo',
    'a'.repeat(63),
    `${'a'.repeat(253)}/${'b'.repeat(63)}`,
  ];
  for (const key of accepted)
    it(`accepts ${key.length > 40 ? `${key.slice(0, 20)}… (${key.length} characters)` : key}`, () => {
      assert.deepEqual(qualifiedNameProblems(key), []);
    });

  const refused: [string, RegExp][] = [
    ['nospecialchars%^=@', /^name part must consist of alphanumeric characters/],
    [
      'cantendwithadash-',
      /^name part must consist of .*regex used for validation is '\(\[A-Za-z0-9\]\[-A-Za-z0-9_\.\]\*\)\?\[A-Za-z0-9\]'\)$/,
    ],
    ['-cantstartwithadash-', /^name part must consist of/],
    [
      'only/one/slash',
      /^a qualified name must consist of .* with an optional DNS subdomain prefix and '\/' \(e\.g\. 'example\.com\/MyName'\)$/,
    ],
    ['Example.com/abc', /^prefix part a lowercase RFC 1123 subdomain must consist of/],
    ['example_com/abc', /^prefix part a lowercase RFC 1123 subdomain/],
    ['example.com/', /^name part must be non-empty$/],
    ['/simple', /^prefix part must be non-empty$/],
    ['a'.repeat(64), /^name part must be no more than 63 characters$/],
    [`${'a'.repeat(254)}/abc`, /^prefix part must be no more than 253 characters$/],
  ];
  for (const [key, message] of refused)
    it(`refuses ${key.length > 40 ? `${key.slice(0, 20)}… (${key.length} characters)` : key}, saying why`, () => {
      const problems = qualifiedNameProblems(key);
      assert.ok(
        problems.some((p) => message.test(p)),
        problems.join('\n'),
      );
    });

  it('an annotation key is checked lower-cased: a capital prefix passes there, not in a label', () => {
    assert.deepEqual(annotationKeyProblems('Example.com/Size'), []);
    assert.notDeepEqual(qualifiedNameProblems('Example.com/Size'), []);
  });
});

describe('a label value', () => {
  for (const value of [
    'simple',
    'now-with-dashes',
    '1-starts-with-num',
    'end-with-num-1',
    '1234',
    'a'.repeat(63),
    '',
  ])
    it(`accepts ${JSON.stringify(value.length > 40 ? `${value.slice(0, 10)}…` : value)}`, () => {
      assert.deepEqual(labelValueProblems(value), []);
    });
  const refused: [string, RegExp][] = [
    [
      'nospecialchars%^=@',
      /^a valid label must be an empty string or consist of alphanumeric characters/,
    ],
    ['Tama-nui-te-rā', /^a valid label must be/],
    ['-cantstartwithadash', /^a valid label must be/],
    ['cantendwithadash-', /^a valid label must be/],
    ['spaces are bad', /^a valid label must be/],
    ['a'.repeat(64), /^must be no more than 63 characters$/],
  ];
  for (const [value, message] of refused)
    it(`refuses ${JSON.stringify(value.length > 40 ? `${value.slice(0, 10)}…` : value)}`, () => {
      const problems = labelValueProblems(value);
      assert.ok(
        problems.some((p) => message.test(p)),
        problems.join('\n'),
      );
    });
});

describe('a label selector', () => {
  const table: {
    name: string;
    selector: Parameters<typeof selectorProblems>[0];
    problems: [string, RegExp][];
  }[] = [
    { name: 'no selector selects everything', selector: undefined, problems: [] },
    {
      name: 'valid keys, values and operators',
      selector: {
        matchLabels: { 'app.kubernetes.io/name': 'web', tier: '' },
        matchExpressions: [
          { key: 'zone', operator: 'In', values: ['eu-1', 'eu-2'] },
          { key: 'gpu', operator: 'Exists' },
          { key: 'spot', operator: 'DoesNotExist', values: [] },
        ],
      },
      problems: [],
    },
    {
      name: 'a bad key and a bad value in matchLabels, each at its own path',
      selector: { matchLabels: { 'a/b/c': 'ok', app: 'not ok' } },
      problems: [
        ['matchLabels.a/b/c', /^label key: a qualified name must consist of/],
        ['matchLabels.app', /^label value "not ok": a valid label must be/],
      ],
    },
    {
      name: 'In and NotIn need values, Exists and DoesNotExist take none',
      selector: {
        matchExpressions: [
          { key: 'a', operator: 'In', values: [] },
          { key: 'b', operator: 'NotIn' },
          { key: 'c', operator: 'Exists', values: ['x'] },
          { key: 'd', operator: 'DoesNotExist', values: ['y'] },
        ],
      },
      problems: [
        ['matchExpressions.0.values', /^operator In needs at least one value$/],
        ['matchExpressions.1.values', /^operator NotIn needs at least one value$/],
        ['matchExpressions.2.values', /^operator Exists takes no values$/],
        ['matchExpressions.3.values', /^operator DoesNotExist takes no values$/],
      ],
    },
    {
      name: "an expression's key and each of its values",
      selector: { matchExpressions: [{ key: '_x', operator: 'NotIn', values: ['ok', 'no!'] }] },
      problems: [
        ['matchExpressions.0.key', /^label key: name part must consist of/],
        ['matchExpressions.0.values.1', /^label value "no!": a valid label must be/],
      ],
    },
  ];
  for (const { name, selector, problems } of table)
    it(name, () => {
      const found = selectorProblems(selector);
      assert.deepEqual(
        found.map((p) => p.path.join('.')),
        problems.map(([path]) => path),
      );
      found.forEach((p, i) => assert.match(p.message, problems[i]![1]));
    });
});
