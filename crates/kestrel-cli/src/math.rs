//! `pow`, `log10`, `ldexp` and `exp` for the code that calls them (ratatui-textarea's
//! line-number width, syntect's scope scores, a float power in async code, the swarm
//! climb's normal approximation), from the
//! pure-Rust `libm` crate (musl's algorithms; `log10` exact at powers of ten, `ldexp`
//! exact, `pow` within 1 ulp of glibc's). Defining them here keeps glibc's libm.so.6 out of
//! the binary's dependencies: one shared library less for each of the three processes of a
//! session to map, relocate and keep resident (~0.4 MB each, bench/RESULTS.md 2026-11-30).

/// `pow(3)`: `x` raised to the power `y`.
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

/// `log10(3)`: the base-10 logarithm of `x`.
#[unsafe(no_mangle)]
pub extern "C" fn log10(x: f64) -> f64 {
    libm::log10(x)
}

/// `ldexp(3)`: `x` times 2 to the power `exp`.
#[unsafe(no_mangle)]
pub extern "C" fn ldexp(x: f64, exp: i32) -> f64 {
    libm::ldexp(x, exp)
}

/// `exp(3)`: e raised to the power `x`.
#[unsafe(no_mangle)]
pub extern "C" fn exp(x: f64) -> f64 {
    libm::exp(x)
}

#[cfg(test)]
mod tests {
    use super::{exp, ldexp, log10, pow};

    #[test]
    fn exp_gives_the_usual_values() {
        assert_eq!(exp(0.0), 1.0);
        assert!((exp(1.0) - std::f64::consts::E).abs() < 1e-15);
        assert!(exp(-1000.0) == 0.0 && exp(1000.0).is_infinite());
    }

    #[test]
    fn log10_is_exact_at_powers_of_ten_and_floors_like_glibc() {
        for exponent in 0..23 {
            assert_eq!(log10(10f64.powi(exponent)), f64::from(exponent));
        }
        assert_eq!(log10(999.0) as u32, 2);
        assert!(log10(0.0).is_infinite() && log10(-1.0).is_nan());
    }

    #[test]
    fn pow_and_ldexp_give_the_usual_values() {
        assert_eq!(pow(2.0, 10.0), 1024.0);
        assert_eq!(pow(9.0, 0.5), 3.0);
        assert!((pow(2.0, 0.5) - std::f64::consts::SQRT_2).abs() < 1e-15);
        assert_eq!(pow(0.0, 0.0), 1.0);
        assert_eq!(ldexp(1.5, 4), 24.0);
        assert_eq!(ldexp(1.0, -1075), 0.0);
    }
}
