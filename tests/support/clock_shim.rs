//! A test-only `LD_PRELOAD` library that moves a process's wall clock, for the clock-fault
//! tests (`tests/common/clock.rs` builds it with `rustc` and starts `redis-server` with
//! it). It replaces `clock_gettime` (for `CLOCK_REALTIME` and `CLOCK_REALTIME_COARSE`),
//! `gettimeofday` and `time`: each reads the real clock by a raw system call and shifts
//! it by what the control file says. Other clocks (`CLOCK_MONOTONIC`) are left alone.
//!
//! Why not `libfaketime`: Debian's `redis-server` is built with jemalloc, which calls
//! `clock_gettime` while `libfaketime` initialises itself, and the process hangs or dies
//! (libfaketime issues #130 and #327, open upstream). This library allocates nothing and
//! resolves no symbol: it makes system calls only.
//!
//! The control file, named by `REDISMUTEX_CLOCK_FILE`, is mapped shared and read on every
//! call: three little-endian `i64`s, `offset_ns`, `rate_ppm` and `since_ns`. The fake time
//! is `real + offset_ns + (real - since_ns) * rate_ppm / 1e6` (the last term only when
//! `rate_ppm` is not 0 and `real` is after `since_ns`): a jump moves `offset_ns`, a clock
//! that runs fast has `rate_ppm > 0` from `since_ns` on. Without the variable, or when the
//! file cannot be mapped, the clock is the real one.
#![allow(unsafe_code, clippy::missing_safety_doc)]

use std::sync::atomic::{AtomicI64, Ordering};

#[repr(C)]
pub struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

#[repr(C)]
pub struct Timeval {
    tv_sec: i64,
    tv_usec: i64,
}

extern "C" {
    fn syscall(number: i64, ...) -> i64;
    fn getenv(name: *const u8) -> *const u8;
}

// x86_64 Linux system call numbers and flags.
const SYS_OPEN: i64 = 2;
const SYS_CLOSE: i64 = 3;
const SYS_MMAP: i64 = 9;
const SYS_CLOCK_GETTIME: i64 = 228;
const CLOCK_REALTIME: i32 = 0;
const CLOCK_REALTIME_COARSE: i32 = 5;
const O_RDONLY: i64 = 0;
const PROT_READ: i64 = 1;
const MAP_SHARED: i64 = 1;
const CONTROL_BYTES: i64 = 24;

/// The mapped control file's address; 0 before the first call, -1 when there is none.
static CONTROL: AtomicI64 = AtomicI64::new(0);

/// The control file's three values, mapped on the first call.
unsafe fn control() -> Option<*const i64> {
    match CONTROL.load(Ordering::Acquire) {
        -1 => return None,
        0 => {}
        addr => return Some(addr as *const i64),
    }
    let path = getenv(b"REDISMUTEX_CLOCK_FILE\0".as_ptr());
    let mut addr = -1;
    if !path.is_null() {
        let fd = syscall(SYS_OPEN, path, O_RDONLY, 0_i64);
        if fd >= 0 {
            let mapped = syscall(SYS_MMAP, 0_i64, CONTROL_BYTES, PROT_READ, MAP_SHARED, fd, 0_i64);
            syscall(SYS_CLOSE, fd);
            if mapped > 0 {
                addr = mapped;
            }
        }
    }
    CONTROL.store(addr, Ordering::Release);
    (addr > 0).then_some(addr as *const i64)
}

/// Moves `ts`, a reading of the real wall clock, as the control file says.
unsafe fn shift(ts: *mut Timespec) {
    let Some(values) = control() else { return };
    let offset = std::ptr::read_volatile(values);
    let rate_ppm = std::ptr::read_volatile(values.add(1));
    let since = std::ptr::read_volatile(values.add(2));
    let real = (*ts).tv_sec * 1_000_000_000 + (*ts).tv_nsec;
    let mut fake = real + offset;
    if rate_ppm != 0 && real > since {
        fake += (i128::from(real - since) * i128::from(rate_ppm) / 1_000_000) as i64;
    }
    (*ts).tv_sec = fake.div_euclid(1_000_000_000);
    (*ts).tv_nsec = fake.rem_euclid(1_000_000_000);
}

#[no_mangle]
pub unsafe extern "C" fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32 {
    let done = syscall(SYS_CLOCK_GETTIME, i64::from(clock), ts);
    if done == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE) {
        shift(ts);
    }
    done as i32
}

#[no_mangle]
pub unsafe extern "C" fn gettimeofday(tv: *mut Timeval, _tz: *mut u8) -> i32 {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let done = clock_gettime(CLOCK_REALTIME, &mut ts);
    if done == 0 && !tv.is_null() {
        (*tv).tv_sec = ts.tv_sec;
        (*tv).tv_usec = ts.tv_nsec / 1000;
    }
    done
}

#[no_mangle]
pub unsafe extern "C" fn time(t: *mut i64) -> i64 {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    clock_gettime(CLOCK_REALTIME, &mut ts);
    if !t.is_null() {
        *t = ts.tv_sec;
    }
    ts.tv_sec
}
