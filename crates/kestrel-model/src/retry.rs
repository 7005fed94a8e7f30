//! When to try a request again, and how long to wait first: jittered exponential
//! backoff within `RetryPolicy`'s attempt count and time budget, deferring to the
//! server's `Retry-After` when it sends one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kestrel_protocol::Timestamp;
use reqwest::header::HeaderMap;

use crate::types::RetryPolicy;

/// Backoff state for one request and its retries.
#[derive(Debug)]
pub(crate) struct Backoff {
    policy: RetryPolicy,
    random: XorShift,
}

impl Backoff {
    pub fn new(policy: RetryPolicy) -> Self {
        Self { policy, random: XorShift::from_time() }
    }

    pub fn max_attempts(&self) -> u32 {
        self.policy.max_attempts.max(1)
    }

    /// How long to wait before the next try, after `attempts_made` tries that took
    /// `elapsed` since the first began; `None` when the attempts or the time budget are
    /// used up (a `Retry-After` that would end past the budget included).
    pub fn next_delay(
        &mut self,
        attempts_made: u32,
        retry_after: Option<Duration>,
        elapsed: Duration,
    ) -> Option<Duration> {
        if attempts_made >= self.max_attempts() {
            return None;
        }
        let delay = retry_after.unwrap_or_else(|| self.backoff(attempts_made));
        (elapsed.saturating_add(delay) <= self.policy.budget).then_some(delay)
    }

    /// Half the exponential step plus a random part of the other half, so clients that
    /// failed together do not retry together.
    fn backoff(&mut self, attempts_made: u32) -> Duration {
        let exponent = attempts_made.saturating_sub(1).min(20);
        let step =
            self.policy.initial_delay.saturating_mul(1 << exponent).min(self.policy.max_delay);
        let half = step / 2;
        let jitter_nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        let jitter = match jitter_nanos {
            0 => Duration::ZERO,
            n => Duration::from_nanos(self.random.next() % (n + 1)),
        };
        half + jitter
    }
}

/// The server's wish for when to retry: `retry-after-ms` (OpenAI) or `Retry-After` in
/// seconds or as an HTTP date (proxies and gateways send that form; a date already past
/// means now).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let seconds = |text: &str, scale: f64| {
        text.parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| Duration::from_secs_f64((n / scale).min(86_400.0)))
    };
    header("retry-after-ms")
        .and_then(|ms| seconds(ms, 1000.0))
        .or_else(|| header("retry-after").and_then(|s| seconds(s, 1.0)))
        .or_else(|| {
            let date = Timestamp::parse_http_date(header("retry-after")?)?;
            let millis = date.millis.saturating_sub(Timestamp::now().millis).clamp(0, 86_400_000);
            Some(Duration::from_millis(u64::try_from(millis).ok()?))
        })
}

/// A tiny xorshift generator: jitter needs spread, not quality, and no `rand` crate.
#[derive(Debug)]
struct XorShift(u64);

impl XorShift {
    fn from_time() -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let seed = u64::from(nanos) ^ (u64::from(std::process::id()) << 32) ^ 0x9E37_79B9_7F4A_7C15;
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
            budget: Duration::from_secs(10),
        }
    }

    #[test]
    fn delays_grow_with_jitter_and_stop_at_max_delay() {
        let mut backoff = Backoff::new(policy());
        for _ in 0..50 {
            let first = backoff.next_delay(1, None, Duration::ZERO).unwrap_or_default();
            assert!((50..=100).contains(&first.as_millis()), "{first:?}");
            let second = backoff.next_delay(2, None, Duration::ZERO).unwrap_or_default();
            assert!((100..=200).contains(&second.as_millis()), "{second:?}");
            let capped = backoff.next_delay(4, None, Duration::ZERO).unwrap_or_default();
            assert!((150..=300).contains(&capped.as_millis()), "{capped:?}");
        }
    }

    #[test]
    fn stops_after_max_attempts() {
        let mut backoff = Backoff::new(policy());
        assert!(backoff.next_delay(4, None, Duration::ZERO).is_some());
        assert_eq!(backoff.next_delay(5, None, Duration::ZERO), None);
    }

    #[test]
    fn honours_retry_after_within_the_budget_only() {
        let mut backoff = Backoff::new(policy());
        let wish = Some(Duration::from_secs(3));
        assert_eq!(backoff.next_delay(1, wish, Duration::ZERO), Some(Duration::from_secs(3)));
        assert_eq!(backoff.next_delay(1, wish, Duration::from_secs(8)), None);
        assert_eq!(backoff.next_delay(1, None, Duration::from_secs(10)), None);
    }

    #[test]
    fn zero_attempt_policy_still_makes_one_try() {
        let mut backoff = Backoff::new(RetryPolicy { max_attempts: 0, ..policy() });
        assert_eq!(backoff.max_attempts(), 1);
        assert_eq!(backoff.next_delay(1, None, Duration::ZERO), None);
    }

    #[test]
    fn reads_retry_after_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("1500.5"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs_f64(1.5005)));
        headers.remove("retry-after-ms");
        // An HTTP date: in the past means now; in the future, the time until then.
        headers.insert("retry-after", HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(retry_after(&headers), Some(Duration::ZERO));
        let soon = Timestamp { millis: Timestamp::now().millis + 60_000 };
        let value = HeaderValue::from_str(&http_date(soon)).unwrap();
        headers.insert("retry-after", value);
        let wait = retry_after(&headers).unwrap();
        assert!(wait > Duration::from_secs(50) && wait <= Duration::from_secs(60), "{wait:?}");
        headers.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT` for `at` (the weekday is not checked by the parser).
    fn http_date(at: Timestamp) -> String {
        const MONTHS: [&str; 12] =
            ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
        let (year, month, day) = at.date();
        let text = at.to_string();
        format!("Mon, {day:02} {} {year} {} GMT", MONTHS[month as usize - 1], &text[11..19])
    }
}
