//! TESTS

mod admission;
mod misc;
mod output;
mod route;
mod server_options;
