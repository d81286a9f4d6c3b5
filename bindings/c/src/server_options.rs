//! A server's options (`botspace_server_options`): the flags, variables and
//! config file the example servers take, the settings they need and the
//! service they describe.

use crate::boundary::Handle;
use crate::bytes::botspace_bytes;
use crate::service::botspace_service;
use crate::status::{botspace_status, fail};
use botspace::{OpenError, Service};
use std::ffi::{c_char, CString};

/// A server's options as `botspace_server_options_parse` read them (the
/// flags, `BOTSPACE_*` variables and config file the Rust example server
/// takes, with the same defaults and messages). Opaque; released by
/// `botspace_server_options_free`.
pub struct botspace_server_options {
    pub(crate) opts: botspace_runtime::options::ServerOptions,
    pub(crate) addr: CString,
    pub(crate) admin_addr: Option<CString>,
    pub(crate) db: CString,
}

impl Handle for botspace_server_options {}

/// What a server needs of its options, borrowed from the
/// `botspace_server_options` handle (valid until it is freed).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_server_settings {
    /// `--addr` (HOST:PORT).
    pub addr: *const c_char,
    /// `--admin-addr`, or NULL: the host API then shares `addr`.
    pub admin_addr: *const c_char,
    /// `--db`, for messages (the service is opened with
    /// `botspace_server_options_open_service`).
    pub db: *const c_char,
    /// `--max-connections`, else the default under the file limit given.
    pub max_connections: usize,
    /// `--request-timeout` in ms (at least 1).
    pub request_timeout_ms: u64,
    /// `--idle-timeout` in ms (at least 1).
    pub idle_timeout_ms: u64,
    pub manual_clock: bool,
    /// Whether to make the tour's demo data (`--demo` or `--demo-token`);
    /// otherwise the server creates nothing and prints no token.
    pub demo: bool,
    pub demo_token: bool,
    /// `--log-format json`.
    pub log_json: bool,
}

pub(crate) fn read_file(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

/// Lossless for the UTF-8 the options are; a NUL inside a value (which
/// no C string can hold) ends it.
pub(crate) fn option_string(s: &str) -> CString {
    CString::new(s.split('\0').next().unwrap_or("")).unwrap_or_default()
}

/// Reads a server's options from `argv[0..argc)` (the arguments after the
/// program name), the process environment and the config file they name.
/// On OK, either `*out_options` is the options to run with, or it is NULL
/// and `*out_text` holds what to print before exiting with `*out_exit`: the
/// usage on stdout with 0 (`--help`), or on stderr with 2 the one line
/// that names the option refused, the value given (never a secret), its
/// form and `--help`. `program` names the server in the usage.
///
/// # Safety
/// `program` must be a NUL-terminated string; `argv` must point at `argc`
/// NUL-terminated strings (or be NULL with 0); the outputs must be
/// writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_server_options_parse(
    program: *const c_char,
    argv: *const *const c_char,
    argc: usize,
    out_options: *mut *mut botspace_server_options,
    out_text: *mut botspace_bytes,
    out_exit: *mut i32,
) -> botspace_status {
    ffi_boundary!({
        let program = arg!(cstr program);
        let out_options = arg!(out out_options);
        let out_text = arg!(out out_text);
        let out_exit = arg!(out out_exit);
        if argc > 0 && argv.is_null() {
            return fail(botspace_status::NullArgument, "argument `argv` is NULL with a count above 0");
        }
        let program = program.to_string_lossy().into_owned();
        let mut args = Vec::with_capacity(argc);
        for i in 0..argc {
            // SAFETY: `argv` holds `argc` pointers.
            let a = unsafe { *argv.add(i) };
            if a.is_null() {
                return fail(botspace_status::NullArgument, format!("argv[{i}] is NULL"));
            }
            // SAFETY: a NUL-terminated string.
            args.push(unsafe { std::ffi::CStr::from_ptr(a) }.to_string_lossy().into_owned());
        }
        use botspace_runtime::options::{parse, usage, Parsed};
        // Where the level comes from is the library's rule
        // (`botspace_output_from_env`), the Rust server's too.
        let usage = usage(&program, botspace_runtime::output::LEVEL_SOURCE);
        let (options, text, exit) = match parse(args, &|k| std::env::var(k).ok(), &read_file) {
            Ok(Parsed::Run(o)) => {
                let handle = botspace_server_options {
                    addr: option_string(&o.addr),
                    admin_addr: o.admin_addr.as_deref().map(option_string),
                    db: option_string(&o.db),
                    opts: *o,
                };
                (handle.into_raw(), String::new(), 0)
            }
            Ok(Parsed::Help) => (std::ptr::null_mut(), format!("{usage}\n"), 0),
            Err(e) => (std::ptr::null_mut(), format!("{e}\n"), 2),
        };
        out_options.write(options);
        out_text.write(botspace_bytes::from_vec(text.into_bytes()));
        out_exit.write(exit);
        botspace_status::Ok
    })
}

/// What a server needs of `options`, the connection cap resolved under a
/// file limit of `file_limit` descriptors (`UINT64_MAX`: unlimited).
///
/// # Safety
/// `options` must be a live handle; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_server_options_settings(
    options: *const botspace_server_options,
    file_limit: u64,
    out: *mut botspace_server_settings,
) -> botspace_status {
    ffi_boundary!({
        let h = arg!(ref options);
        let out = arg!(out out);
        let ms = |d: std::time::Duration| (d.as_millis().min(u128::from(u64::MAX)) as u64).max(1);
        let s = botspace_server_settings {
            addr: h.addr.as_ptr(),
            admin_addr: h.admin_addr.as_ref().map_or(std::ptr::null(), |a| a.as_ptr()),
            db: h.db.as_ptr(),
            max_connections: h.opts.max_connections(file_limit),
            request_timeout_ms: ms(h.opts.request_timeout),
            idle_timeout_ms: ms(h.opts.idle_timeout),
            manual_clock: h.opts.manual_clock,
            demo: h.opts.wants_demo(),
            demo_token: h.opts.demo_token,
            log_json: h.opts.log_json,
        };
        out.write(s);
        botspace_status::Ok
    })
}

/// Opens the service the options describe: the admin secret given (or read
/// from its file), else a new one, which `*out_generated_secret` then holds
/// for the host to print once (`{NULL, 0}` when one was given); the
/// operational key; the database and the rest. On failure the message
/// (`botspace_last_error_message`) is the line to log:
/// `BOTSPACE_STATUS_INVALID_CONFIG` for options that cannot be used
/// together or a value the service refuses, `BOTSPACE_STATUS_STORAGE_ERROR`
/// when the database cannot be opened.
///
/// # Safety
/// `options` must be a live handle; the outputs must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_server_options_open_service(
    options: *const botspace_server_options,
    out_service: *mut *mut botspace_service,
    out_generated_secret: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        let options = arg!(ref options);
        let out_service = arg!(out out_service);
        let out_generated_secret = arg!(out out_generated_secret);
        let o = &options.opts;
        let (secret, generated) = match o.admin_secret(&read_file) {
            Ok(Some(s)) => (s, false),
            Ok(None) => match botspace_runtime::options::generate_secret() {
                Ok(s) => (s, true),
                Err(e) => return fail(botspace_status::StorageError, e),
            },
            Err(e) => return fail(botspace_status::InvalidConfig, e),
        };
        let config = match o.config(&secret, &read_file) {
            Ok(c) => c,
            Err(e) => return fail(botspace_status::InvalidConfig, e),
        };
        // The URL's password, if any, never reaches the log.
        let shown = config.database_for_logs();
        let svc = match Service::open(config) {
            Ok(s) => s,
            Err(e @ OpenError::Config(_)) => {
                return fail(botspace_status::InvalidConfig, format!("cannot open the service on {shown}: {e}"))
            }
            Err(e) => return fail(botspace_status::StorageError, format!("cannot open the service on {shown}: {e}")),
        };
        out_service.write(botspace_service::new(svc).into_raw());
        out_generated_secret.write(if generated {
            botspace_bytes::from_vec(secret.into_bytes())
        } else {
            botspace_bytes::EMPTY
        });
        botspace_status::Ok
    })
}

/// Releases options and sets `*options` to NULL; accepts NULL and a
/// pointer to NULL.
///
/// # Safety
/// `*options` must be NULL or a handle from `botspace_server_options_parse`
/// not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_server_options_free(options: *mut *mut botspace_server_options) {
    // SAFETY: the contract above.
    unsafe { Handle::free(options) }
}
