//! Fault injection on a [`Fleet`]: each fault is recorded (what, at whom, from when to
//! when) for the report, then done: a worker SIGKILLed or frozen, its proxy set to a
//! fault or reset, every client of the lock server killed.

use nix::sys::signal::Signal;

use super::events::now_us;
use super::fleet::{signal, Fleet, Worker};
use super::proxy::Fault;
use super::record::{FaultKind, FaultRecord, Target};

impl Fleet {
    fn worker_mut(&mut self, name: &str) -> &mut Worker {
        self.workers
            .iter_mut()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    /// Records a fault starting now; returns its index for [`end`](Self::end).
    pub fn begin(&mut self, kind: FaultKind, target: Target) -> usize {
        let now = now_us();
        self.faults.push(FaultRecord {
            kind,
            target,
            start_us: now,
            end_us: now,
        });
        self.faults.len() - 1
    }

    /// Records that fault `index` ended now.
    pub fn end(&mut self, index: usize) {
        self.faults[index].end_us = now_us();
    }

    /// SIGKILLs a worker, waits for it, and removes its registrations on the referee (a
    /// dead process cannot leave).
    pub async fn kill_worker(&mut self, name: &str) {
        let fault = self.begin(FaultKind::KillWorker, Target::Worker(name.to_string()));
        let worker = self.worker_mut(name);
        signal(worker.pid, Signal::SIGKILL);
        let _ = worker.child.wait().await;
        worker.alive = false;
        self.referee
            .evict(name)
            .await
            .expect("evict on the referee");
        self.end(fault);
    }

    /// Freezes a worker with SIGSTOP; returns the fault index for [`thaw`](Self::thaw).
    pub fn freeze(&mut self, name: &str) -> usize {
        let fault = self.begin(FaultKind::FreezeWorker, Target::Worker(name.to_string()));
        signal(self.worker(name).pid, Signal::SIGSTOP);
        fault
    }

    pub fn thaw(&mut self, fault: usize) {
        let Target::Worker(name) = self.faults[fault].target.clone() else {
            panic!("fault {fault} froze no worker");
        };
        // Ends before the signal: the worker may print before this returns.
        self.end(fault);
        signal(self.worker(&name).pid, Signal::SIGCONT);
    }

    /// Sets `fault` on the proxy of `name`, recording it as `kind` (healed by
    /// [`heal_proxy`](Self::heal_proxy)).
    pub fn proxy_fault(&mut self, name: &str, kind: FaultKind, fault: Fault) -> usize {
        let index = self.begin(kind, Target::Worker(name.to_string()));
        self.worker(name).proxy.set(fault);
        index
    }

    pub fn heal_proxy(&mut self, index: usize) {
        if let Target::Worker(name) = self.faults[index].target.clone() {
            self.worker(&name).proxy.set(Fault::Pass);
        }
        self.end(index);
    }

    /// Resets every connection of the proxy of `name`.
    pub fn reset(&mut self, name: &str) {
        let index = self.begin(FaultKind::Reset, Target::Worker(name.to_string()));
        self.worker(name).proxy.reset_all();
        self.end(index);
    }

    /// `CLIENT KILL TYPE normal` on the lock server: every client but this one.
    pub async fn client_kill(&mut self) {
        let index = self.begin(FaultKind::ClientKill, Target::Server);
        let _: i64 = redis::cmd("CLIENT")
            .arg(&["KILL", "TYPE", "normal"])
            .query_async(&mut self.lock_conn().await)
            .await
            .expect("CLIENT KILL");
        self.end(index);
    }
}
