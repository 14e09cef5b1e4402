/**
 * Label keys, label values, annotation keys and label selectors, checked as the API
 * server checks them (k8s.io/apimachinery: `validation.IsQualifiedName`,
 * `IsValidLabelValue`, `IsDNS1123Subdomain`, and metav1 `ValidateLabelSelector`), with
 * its own messages, so a policy is refused in review for what the cluster would refuse
 * (or, for a selector, silently never match) later. Pure; the JSON Schema checks only
 * lengths and operators, these check the characters and the parts.
 */

const qualifiedNameFormat = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const qualifiedName = new RegExp(`^${qualifiedNameFormat}$`);
const labelValueFormat = `(${qualifiedNameFormat})?`;
const labelValue = new RegExp(`^${labelValueFormat}$`);
const dns1123LabelFormat = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const dns1123SubdomainFormat = `${dns1123LabelFormat}(\\.${dns1123LabelFormat})*`;
const dns1123Subdomain = new RegExp(`^${dns1123SubdomainFormat}$`);

const qualifiedNameMessage =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/** The API server's RegexError: the rule, examples, and the regular expression. */
function regexError(message: string, format: string, ...examples: string[]): string {
  const shown = examples.map((e) => `'${e}'`).join(',  or ');
  return `${message} (e.g. ${shown}, regex used for validation is '${format}')`;
}

const maxLength = (n: number): string => `must be no more than ${n} characters`;

/** IsDNS1123Subdomain: problems, [] when valid. */
export function dnsSubdomainProblems(value: string): string[] {
  const problems: string[] = [];
  if (value.length > 253) problems.push(maxLength(253));
  if (!dns1123Subdomain.test(value))
    problems.push(
      regexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        dns1123SubdomainFormat,
        'example.com',
      ),
    );
  return problems;
}

/** IsQualifiedName: `[prefix/]name`, what label keys and annotation keys must be. */
export function qualifiedNameProblems(value: string): string[] {
  const parts = value.split('/');
  if (parts.length > 2)
    return [
      `a qualified name ${regexError(qualifiedNameMessage, qualifiedNameFormat, 'MyName', 'my.name', '123-abc')} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  const problems: string[] = [];
  const name = parts.at(-1)!;
  if (parts.length === 2) {
    const prefix = parts[0]!;
    if (prefix === '') problems.push('prefix part must be non-empty');
    else problems.push(...dnsSubdomainProblems(prefix).map((p) => `prefix part ${p}`));
  }
  if (name === '') problems.push('name part must be non-empty');
  else if (name.length > 63) problems.push(`name part ${maxLength(63)}`);
  if (!qualifiedName.test(name))
    problems.push(
      `name part ${regexError(qualifiedNameMessage, qualifiedNameFormat, 'MyName', 'my.name', '123-abc')}`,
    );
  return problems;
}

/** IsValidLabelValue: empty, or at most 63 characters of a qualified name's name part. */
export function labelValueProblems(value: string): string[] {
  const problems: string[] = [];
  if (value.length > 63) problems.push(maxLength(63));
  if (!labelValue.test(value))
    problems.push(
      regexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        labelValueFormat,
        'MyValue',
        'my_value',
        '12345',
      ),
    );
  return problems;
}

/** ValidateAnnotations checks keys lower-cased: a prefix may be written in capitals. */
export const annotationKeyProblems = (key: string): string[] =>
  qualifiedNameProblems(key.toLowerCase());

export interface SelectorInput {
  readonly matchLabels?: Readonly<Record<string, string>>;
  readonly matchExpressions?: readonly {
    readonly key: string;
    readonly operator: string;
    readonly values?: readonly string[];
  }[];
}

/** One problem of a selector: its field path below the selector, and why. */
export interface SelectorProblem {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/**
 * ValidateLabelSelector: every matchLabels key and value, every expression's key, its
 * operator's values (In/NotIn need some, Exists/DoesNotExist take none) and each value.
 */
export function selectorProblems(selector: SelectorInput | undefined): SelectorProblem[] {
  const problems: SelectorProblem[] = [];
  const add = (path: (string | number)[], label: string, messages: string[]): void => {
    for (const message of messages) problems.push({ path, message: `${label}: ${message}` });
  };
  for (const [key, value] of Object.entries(selector?.matchLabels ?? {})) {
    add(['matchLabels', key], 'label key', qualifiedNameProblems(key));
    add(['matchLabels', key], `label value ${JSON.stringify(value)}`, labelValueProblems(value));
  }
  (selector?.matchExpressions ?? []).forEach((expression, i) => {
    add(['matchExpressions', i, 'key'], 'label key', qualifiedNameProblems(expression.key));
    const values = expression.values ?? [];
    const setBased = expression.operator === 'In' || expression.operator === 'NotIn';
    if (setBased && values.length === 0)
      problems.push({
        path: ['matchExpressions', i, 'values'],
        message: `operator ${expression.operator} needs at least one value`,
      });
    if (!setBased && values.length > 0)
      problems.push({
        path: ['matchExpressions', i, 'values'],
        message: `operator ${expression.operator} takes no values`,
      });
    values.forEach((value, v) =>
      add(
        ['matchExpressions', i, 'values', v],
        `label value ${JSON.stringify(value)}`,
        labelValueProblems(value),
      ),
    );
  });
  return problems;
}
