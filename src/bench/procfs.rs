//! What the bench reads of a process from outside: resident memory (`/proc/<pid>/status`) and CPU time
//! (`/proc/<pid>/stat`). Linux only; elsewhere the figures are missing, not wrong.

use std::time::Duration;

/// Linux reports CPU time in clock ticks of `USER_HZ`, which is 100 on every architecture it exports to user space.
const TICKS_PER_SECOND: u64 = 100;

/// Resident memory of a process in KiB (`VmRSS`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_field_kib(&status, "VmRSS")
}

/// CPU time a process has used so far, user and system.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_cpu_ticks(&stat).map(|ticks| Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND))
}

/// CPU time of this process.
pub fn own_cpu_time() -> Option<Duration> {
    cpu_time(std::process::id())
}

/// CPU time the whole machine has been busy (all cores, anything but idle and I/O wait) since it booted.
pub fn machine_busy_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    machine_busy_ticks(&stat).map(|ticks| Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND))
}

/// Busy ticks from the first (`cpu`, all cores) line of `/proc/stat`.
pub fn machine_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line.split_whitespace().skip(1).map(|t| t.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice, already counted in user and nice]
    let (idle, iowait) = (*ticks.get(3)?, *ticks.get(4)?);
    Some(ticks.iter().take(8).sum::<u64>() - idle - iowait)
}

/// A `Name:   1234 kB` line of `/proc/<pid>/status`.
pub fn status_field_kib(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.split(':').next() == Some(name))?;
    let value = line.split_once(':')?.1.trim();
    value.strip_suffix("kB").unwrap_or(value).trim().parse().ok()
}

/// utime + stime, in ticks, from `/proc/<pid>/stat`. The command name (field 2) may hold spaces and parentheses,
/// so the fields are counted from the last `)`.
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_is_read_from_the_status_file() {
        let status = "Name:\tturn-manager\nVmPeak:\t  900 kB\nVmRSS:\t   12345 kB\nRssAnon:\t 100 kB\n";
        assert_eq!(status_field_kib(status, "VmRSS"), Some(12345));
        assert_eq!(status_field_kib(status, "VmHWM"), None);
    }

    #[test]
    fn cpu_ticks_are_counted_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (tokio (worker) 1) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 70 0 0 20 0 4 0 100 1000 300";
        assert_eq!(stat_cpu_ticks(stat), Some(320));
        assert_eq!(stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn the_machine_is_busy_for_everything_but_idle_and_io_wait() {
        let stat = "cpu  100 5 50 1000 40 3 2 1 7 0\ncpu0 50 2 25 500 20 1 1 0 3 0\nintr 1\n";
        assert_eq!(machine_busy_ticks(stat), Some(100 + 5 + 50 + 3 + 2 + 1), "guest time is already in user");
        assert_eq!(machine_busy_ticks("intr 1\n"), None);
    }

    #[test]
    fn this_process_can_be_read_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(rss_kib(std::process::id()).is_some_and(|kib| kib > 0));
            assert!(own_cpu_time().is_some());
        }
    }
}
