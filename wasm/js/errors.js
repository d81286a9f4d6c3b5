// The error classes of botspace. The Rust side of the module constructs
// ConfigError, StorageError, InvalidImageError, GatewayRejectedError and
// PanicError itself (wasm/src/imp.rs imports them from this file), so an
// error's class and `code` are set where it arises, never guessed later
// from its message. An error's HTTP status is never written here: it is
// the core's, read from its table of error codes (`errorStatus`, exported
// by the module; see docs/errors.md).

import { parseResponse, toFetchResponse } from './http.js';
import { errorStatus } from './botspace.js';

/** Base class of every error botspace throws. `code` is machine-readable. */
export class BotspaceError extends Error {
  constructor(message, options = {}) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'BotspaceError';
    this.code = options.code ?? 'botspace_error';
  }
}

/** The configuration was refused (bad JSON, unknown field, bad value). */
export class ConfigError extends BotspaceError {
  constructor(message, options = {}) {
    super(message, { code: 'invalid_config', ...options });
    this.name = 'ConfigError';
  }
}

/**
 * Opening, exporting or importing the database failed. `status` is the
 * HTTP status of its `code` in the core's table.
 */
export class DatabaseError extends BotspaceError {
  constructor(message, options = {}) {
    super(message, { code: 'storage_error', ...options });
    this.name = 'DatabaseError';
    this.status = errorStatus(this.code);
  }
}

/** SQLite failed (opening, exporting, importing): code `storage_error` (status 500). */
export class StorageError extends DatabaseError {
  constructor(message, options = {}) {
    super(message, { ...options, code: 'storage_error' });
    this.name = 'StorageError';
  }
}

/**
 * importDatabase was given bytes that are not a botspace database image
 * (or fail its integrity check): code `invalid_request` (status 400).
 * Nothing changed.
 */
export class InvalidImageError extends DatabaseError {
  constructor(message, options = {}) {
    super(message, { ...options, code: 'invalid_request' });
    this.name = 'InvalidImageError';
  }
}

/**
 * A gateway upgrade was refused (401, 403, 426, 429 …). `response` holds
 * the complete HTTP response to send back; `status`, `code` (the stable
 * error code of docs/errors.md, e.g. `connection_limit`) and `description` are read from it.
 */
export class GatewayRejectedError extends BotspaceError {
  constructor(response) {
    const parsed = parseResponse(response);
    const status = typeof parsed === 'string' ? 0 : parsed.status;
    let body = {};
    try {
      body = parsed.json();
    } catch {
      // not JSON: keep the defaults
    }
    super(body.description ?? `gateway upgrade refused with HTTP ${status}`, {
      code: body.error ?? 'gateway_rejected',
    });
    this.name = 'GatewayRejectedError';
    this.status = status;
    this.description = body.description ?? '';
    this.parameters = body.parameters;
    this.response = response;
  }

  /** The refusal as a fetch `Response`. */
  toResponse() {
    return toFetchResponse(this.response);
  }
}

/**
 * A bug inside botspace (a Rust panic or a WebAssembly trap). The message
 * carries the panic message. WebAssembly cannot unwind, so the module
 * instance is unusable afterwards: every later call throws this error too.
 */
export class PanicError extends BotspaceError {
  constructor(message, options = {}) {
    super(message, { code: 'panic', ...options });
    this.name = 'PanicError';
  }
}

// Why the module is unusable (the first panic or trap), or null.
let poisoned = null;

/** @internal Records that the module can no longer be called; returns the error to throw. */
export function poison(message, options = {}) {
  poisoned ??= message;
  return new PanicError(poisoned === message ? message : `${message}; after: ${poisoned}`, options);
}

/** @internal Called by the Rust panic hook with the panic message. */
export function modulePanicked(message) {
  return poison(message);
}

/** @internal The reason the module is unusable, or null while it is fine. */
export function poisonReason() {
  return poisoned;
}
