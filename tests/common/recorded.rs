//! What the crate recorded in a metrics-util `DebuggingRecorder`, added up across
//! snapshots (a snapshot resets counters and gauges to 0 and empties histograms, so the
//! running totals are kept here).

use std::collections::BTreeMap;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;

/// A series: its metric name and its labels, sorted.
pub type Series = (String, Vec<(String, String)>);

/// One series' value so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Counter(u64),
    Gauge(f64),
    Histogram(Vec<f64>),
}

/// The running totals of a recorder's series.
pub struct Recorded {
    snapshotter: Snapshotter,
    series: BTreeMap<Series, Value>,
}

impl Recorded {
    /// The totals of `recorder`, which the caller installs.
    pub fn of(recorder: &DebuggingRecorder) -> Self {
        Self {
            snapshotter: recorder.snapshotter(),
            series: BTreeMap::new(),
        }
    }

    /// Adds what was recorded since the last look.
    fn take(&mut self) {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let (kind, key) = key.into_parts();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|label| (label.key().to_owned(), label.value().to_owned()))
                .collect();
            labels.sort();
            let series = (key.name().to_owned(), labels);
            let total = self.series.entry(series).or_insert(match kind {
                MetricKind::Counter => Value::Counter(0),
                MetricKind::Gauge => Value::Gauge(0.0),
                MetricKind::Histogram => Value::Histogram(Vec::new()),
            });
            match (total, value) {
                (Value::Counter(total), DebugValue::Counter(n)) => *total += n,
                (Value::Gauge(total), DebugValue::Gauge(x)) => *total += x.into_inner(),
                (Value::Histogram(total), DebugValue::Histogram(xs)) => {
                    total.extend(xs.into_iter().map(|x| x.into_inner()));
                }
                (total, value) => panic!("{total:?} then {value:?}"),
            }
        }
    }

    /// Every series recorded so far.
    pub fn series(&mut self) -> Vec<Series> {
        self.take();
        self.series.keys().cloned().collect()
    }

    fn value(&mut self, name: &str, labels: &[(&str, &str)]) -> Option<Value> {
        self.take();
        let mut labels: Vec<(String, String)> = labels
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        labels.sort();
        self.series.get(&(name.to_owned(), labels)).cloned()
    }

    /// The counter's total (0 if never recorded).
    pub fn counter(&mut self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.value(name, labels) {
            None => 0,
            Some(Value::Counter(n)) => n,
            Some(other) => panic!("{name} {labels:?} is {other:?}"),
        }
    }

    /// The gauge's value (0 if never recorded).
    pub fn gauge(&mut self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match self.value(name, labels) {
            None => 0.0,
            Some(Value::Gauge(x)) => x,
            Some(other) => panic!("{name} {labels:?} is {other:?}"),
        }
    }

    /// The histogram's samples (none if never recorded).
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        match self.value(name, labels) {
            None => Vec::new(),
            Some(Value::Histogram(xs)) => xs,
            Some(other) => panic!("{name} {labels:?} is {other:?}"),
        }
    }

    /// The sum of every gauge named `name`, whatever its labels.
    pub fn gauge_total(&mut self, name: &str) -> f64 {
        self.take();
        self.series
            .iter()
            .filter(|((metric, _), _)| metric == name)
            .map(|(_, value)| match value {
                Value::Gauge(x) => *x,
                other => panic!("{name} is {other:?}"),
            })
            .sum()
    }
}
