/**
 * One error shape for everything tollgate sends to the API server, so callers
 * (the dispatcher's classifier, the informer's restart logic) look at one field:
 * `statusCode` for an HTTP answer, `code` (ECONNREFUSED, UND_ERR_SOCKET, ...) for a
 * network failure, `name === 'AbortError'` for a cancelled request.
 */
export class KubeApiError extends Error {
  /** HTTP status the API server answered with. */
  readonly statusCode: number;
  /** `Status.reason` (Conflict, Invalid, NotFound, Expired, ...), when the body carried one. */
  readonly reason: string | undefined;
  /** `Status.message` as the API server sent it (the Error message adds context). */
  readonly apiMessage: string;
  /** From the Retry-After header or `Status.details.retryAfterSeconds` (429, some 5xx). */
  retryAfterSeconds: number | undefined;
  /** `Status.details.causes`, empty when the API gave none. */
  readonly causes: readonly { reason?: string; message?: string; field?: string }[];
  constructor(
    statusCode: number,
    message: string,
    reason?: string,
    apiMessage = message,
    causes: readonly { reason?: string; message?: string; field?: string }[] = [],
  ) {
    super(message);
    this.name = 'KubeApiError';
    this.statusCode = statusCode;
    this.reason = reason;
    this.apiMessage = apiMessage;
    this.causes = causes;
    this.retryAfterSeconds = undefined;
  }
}

interface StatusBody {
  message?: unknown;
  reason?: unknown;
  code?: unknown;
  details?: { causes?: unknown; retryAfterSeconds?: unknown };
}

function parseBody(body: unknown): StatusBody | undefined {
  if (body && typeof body === 'object') return body as StatusBody;
  if (typeof body === 'string') {
    try {
      const parsed: unknown = JSON.parse(body);
      return parsed && typeof parsed === 'object' ? (parsed as StatusBody) : undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * Normalises what @kubernetes/client-node throws: its `ApiException` carries the HTTP
 * status in `code` and the Status object in `body`; `Watch` throws an Error with
 * `statusCode`; undici network failures are `TypeError('fetch failed')` with the
 * system error in `cause`. Returns a KubeApiError for HTTP failures and an Error
 * carrying the network `code` otherwise; abort errors pass through unchanged.
 */
export function toKubeError(error: unknown, context: string): Error {
  if (error instanceof KubeApiError) return error;
  if (!(error instanceof Error)) return new Error(`${context}: ${String(error)}`);
  if (error.name === 'AbortError' || error.name === 'TimeoutError') return error;
  const withFields = error as Error & {
    code?: unknown;
    statusCode?: unknown;
    body?: unknown;
    cause?: unknown;
  };
  const httpCode =
    typeof withFields.statusCode === 'number'
      ? withFields.statusCode
      : typeof withFields.code === 'number'
        ? withFields.code
        : undefined;
  if (httpCode !== undefined) {
    const status = parseBody(withFields.body);
    const apiMessage =
      typeof status?.message === 'string' ? status.message : error.message.split('\n')[0];
    const reason = typeof status?.reason === 'string' ? status.reason : undefined;
    const causes = Array.isArray(status?.details?.causes)
      ? (status.details.causes as KubeApiError['causes'])
      : [];
    const result = new KubeApiError(
      httpCode,
      `${context}: ${httpCode} ${apiMessage}`,
      reason,
      apiMessage,
      causes,
    );
    const headers = (withFields as { headers?: Record<string, unknown> }).headers;
    const header = headers?.['retry-after'] ?? headers?.['Retry-After'];
    const fromBody = status?.details?.retryAfterSeconds;
    if (typeof fromBody === 'number') result.retryAfterSeconds = fromBody;
    else if (typeof header === 'string' && /^\d+$/.test(header.trim()))
      result.retryAfterSeconds = Number(header.trim());
    return result;
  }
  const cause = withFields.cause as { code?: unknown; message?: unknown } | undefined;
  const networkCode =
    typeof withFields.code === 'string'
      ? withFields.code
      : typeof cause?.code === 'string'
        ? cause.code
        : undefined;
  const detail =
    typeof cause?.message === 'string' ? `${error.message}: ${cause.message}` : error.message;
  const wrapped = new Error(`${context}: ${detail}`, { cause: error }) as Error & { code?: string };
  if (networkCode) wrapped.code = networkCode;
  return wrapped;
}

export function statusCodeOf(error: unknown): number | undefined {
  const code = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof code === 'number' ? code : undefined;
}
