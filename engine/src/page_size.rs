//! A page-size argument (`limit`, or the name an inventory row gives it) read
//! by value, as the servers behind the guard read it, in bounded memory.
//!
//! A server reads `5e1`, `50.0` and `50` alike as fifty, and a Python (pydantic)
//! server reads the strings `"50"`, `" 50 "` and `"5_0"` as numbers too. The
//! guard compares the value, not the spelling, with the row's maximum
//! (`specs/request-guard.md`, "Page sizes"):
//!
//! - a JSON number is read whole, whatever its length or form;
//! - a string is read as a number if, without the ASCII whitespace around it,
//!   it is one in the lenient decimal form the readers share (a sign, digits
//!   with single underscores between them, a fraction, an exponent); a
//!   string that is not one is *not a number*, and the guard refuses it
//!   rather than guess what a server makes of it (`"0x32"`, `"Infinity"`);
//! - anything else (`null`, `true`, a container) is no page size: the server
//!   uses its default or rejects the call itself.
//!
//! Memory: the first [`SIG_DIGITS`] significant digits, the exponent (its
//! magnitude saturating), and at most [`TEXT_CAP`] bytes of the text for the
//! refusal's message. The value is the one an IEEE double reader gets, to
//! within the rounding of digits past the thirty-second.

/// Significant digits kept; more change a double only in its last bit.
pub const SIG_DIGITS: usize = 32;

/// Bytes of the value's text kept for the refusal (its start; `…` marks a cut).
pub const TEXT_CAP: usize = 32;

/// Bytes of a string value read at most: a longer string is not a page size.
pub const STRING_CAP: usize = 64;

/// Encoded bytes of a string value kept: a string of at most [`STRING_CAP`]
/// decoded bytes takes at most this many (a `\uXXXX` escape is six bytes
/// for one to three decoded ones).
pub const STRING_ENCODED_CAP: usize = STRING_CAP * 6;

/// Where the reader is in `[+-]? digits [. digits] [e [+-] digits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Part {
    #[default]
    Start,
    Sign,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
    Bad,
}

/// A number read one byte at a time.
#[derive(Debug, Clone, Default)]
pub struct NumRead {
    part: Part,
    /// A digit of the mantissa was seen.
    digits_seen: bool,
    /// The last byte was a digit / an underscore (for `1_000`).
    after_digit: bool,
    after_underscore: bool,
    neg: bool,
    sig: [u8; SIG_DIGITS],
    sig_len: usize,
    /// The kept digits, read as an integer, times ten to this.
    scale: i64,
    exp: i64,
    exp_neg: bool,
    exp_seen: bool,
    text: [u8; TEXT_CAP],
    text_len: usize,
    text_cut: bool,
}

/// The exponent's magnitude stops growing here: far past any double.
const EXP_SATURATE: i64 = 1 << 40;

impl NumRead {
    pub fn new() -> NumRead {
        NumRead::default()
    }

    /// Start again (the buffers are inline; nothing is freed or allocated).
    pub fn clear(&mut self) {
        *self = NumRead::default();
    }

    /// Read more of the number's text.
    pub fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push_byte(b);
        }
    }

    fn push_byte(&mut self, b: u8) {
        if let Some(slot) = self.text.get_mut(self.text_len) {
            *slot = b;
            self.text_len += 1;
        } else {
            self.text_cut = true;
        }
        if self.part == Part::Bad {
            return;
        }
        if b == b'_' {
            // Between two digits only, one at a time.
            if self.after_digit {
                self.after_digit = false;
                self.after_underscore = true;
            } else {
                self.part = Part::Bad;
            }
            return;
        }
        let was_underscore = std::mem::replace(&mut self.after_underscore, false);
        let digit = b.is_ascii_digit();
        self.after_digit = digit;
        if was_underscore && !digit {
            self.part = Part::Bad;
            return;
        }
        self.part = match (self.part, b) {
            (Part::Start | Part::Sign | Part::Int, b'0'..=b'9') => {
                self.mantissa_digit(b - b'0', false);
                Part::Int
            }
            (Part::Dot | Part::Frac, b'0'..=b'9') => {
                self.mantissa_digit(b - b'0', true);
                Part::Frac
            }
            (Part::E | Part::ESign | Part::Exp, b'0'..=b'9') => {
                self.exp = (self.exp * 10 + (b - b'0') as i64).min(EXP_SATURATE);
                self.exp_seen = true;
                Part::Exp
            }
            (Part::Start, b'-' | b'+') => {
                self.neg = b == b'-';
                Part::Sign
            }
            (Part::Start | Part::Sign | Part::Int, b'.') => Part::Dot,
            (Part::Int | Part::Dot | Part::Frac, b'e' | b'E') if self.digits_seen => Part::E,
            (Part::E, b'-' | b'+') => {
                self.exp_neg = b == b'-';
                Part::ESign
            }
            _ => Part::Bad,
        };
    }

    fn mantissa_digit(&mut self, d: u8, frac: bool) {
        self.digits_seen = true;
        if self.sig_len == 0 && d == 0 {
            // A leading zero: only its place counts, after the point.
            if frac {
                self.scale -= 1;
            }
            return;
        }
        if let Some(slot) = self.sig.get_mut(self.sig_len) {
            *slot = b'0' + d;
            self.sig_len += 1;
            if frac {
                self.scale -= 1;
            }
        } else if !frac {
            self.scale += 1;
        }
    }

    /// Whether the text so far is a whole number in the lenient form.
    pub fn is_number(&self) -> bool {
        !self.after_underscore
            && match self.part {
                Part::Int | Part::Frac => true,
                Part::Dot => self.digits_seen,
                Part::Exp => self.exp_seen,
                _ => false,
            }
    }

    /// The value, if [`NumRead::is_number`]; a magnitude past any double is
    /// infinite.
    pub fn value(&self) -> Option<f64> {
        if !self.is_number() {
            return None;
        }
        let sign = if self.neg { -1.0 } else { 1.0 };
        let digits = self.sig.get(..self.sig_len).unwrap_or(&[]);
        if digits.is_empty() {
            return Some(sign * 0.0);
        }
        let exp = if self.exp_neg { -self.exp } else { self.exp };
        // Past ±400 every reading of 32 digits is zero or infinite already.
        let e = (self.scale + exp).clamp(-1000, 1000);
        // `DIGITS e[-]EXP`, on the stack.
        let mut buf = [0u8; SIG_DIGITS + 8];
        let mut n = 0;
        let mut put = |bytes: &[u8]| {
            for &b in bytes {
                if let Some(slot) = buf.get_mut(n) {
                    *slot = b;
                    n += 1;
                }
            }
        };
        put(digits);
        put(if e < 0 { b"e-" } else { b"e" });
        put(crate::record::u64_digits(e.unsigned_abs(), &mut [0; 20]));
        let text = std::str::from_utf8(buf.get(..n)?).ok()?;
        text.parse::<f64>().ok().map(|v| sign * v)
    }

    /// The text read, as written (its first [`TEXT_CAP`] bytes, then `…`).
    pub fn text(&self) -> String {
        let mut s =
            String::from_utf8_lossy(self.text.get(..self.text_len).unwrap_or(&[])).into_owned();
        if self.text_cut {
            s.push('…');
        }
        s
    }
}

/// A string value read as a page size: `None` if it is not a number
/// (decoded contents, without their quotes).
pub fn read_string(decoded: &[u8]) -> Option<NumRead> {
    let t = decoded.trim_ascii();
    let mut r = NumRead::new();
    r.push(t);
    r.is_number().then_some(r)
}

#[cfg(test)]
mod tests {
    use super::{read_string, NumRead};

    fn num(s: &str) -> Option<f64> {
        let mut r = NumRead::new();
        r.push(s.as_bytes());
        r.value()
    }

    /// Every JSON spelling of a value reads as that value, as a double reader
    /// reads it, however long.
    #[test]
    fn json_numbers_read_by_value() {
        for (text, want) in [
            ("50", 50.0),
            ("5e1", 50.0),
            ("5E+1", 50.0),
            ("50.0", 50.0),
            ("500e-1", 50.0),
            ("0.5e2", 50.0),
            ("-0", -0.0),
            ("0", 0.0),
            ("0.000001", 0.000001),
            ("10.5", 10.5),
            ("1e400", f64::INFINITY),
            ("1e-400", 0.0),
            ("-1e400", f64::NEG_INFINITY),
            ("18446744073709551616", 18446744073709551616.0),
        ] {
            assert_eq!(num(text), Some(want), "{text}");
        }
        let long = format!("1{}", "0".repeat(300));
        assert_eq!(num(&long), Some(1e300));
        let tiny = format!("0.{}1", "0".repeat(300));
        assert_eq!(num(&tiny), Some(1e-301));
        let digits = "12345678901234567890123456789012345678901234567890";
        assert_eq!(num(digits), digits.parse::<f64>().ok());
        let frac = format!("0.{digits}e5");
        assert_eq!(num(&frac), frac.parse::<f64>().ok());
        assert_eq!(num("1e99999999999999999999999"), Some(f64::INFINITY));
        let mut r = NumRead::new();
        r.push(long.as_bytes());
        assert_eq!(r.text(), format!("1{}…", "0".repeat(31)));
    }

    /// Strings: the forms a lenient reader takes are numbers; any other is not.
    #[test]
    fn strings_read_as_numbers_or_not() {
        let v = |s: &str| read_string(s.as_bytes()).and_then(|r| r.value());
        for (text, want) in [
            ("50", 50.0),
            (" 50 ", 50.0),
            ("\t+50\n", 50.0),
            ("5_0", 50.0),
            ("1_000.000_5", 1000.0005),
            ("007", 7.0),
            ("5.", 5.0),
            (".5", 0.5),
            ("5e1", 50.0),
            ("-3", -3.0),
        ] {
            assert_eq!(v(text), Some(want), "{text:?}");
        }
        for text in [
            "", " ", "abc", "0x32", "Infinity", "inf", "NaN", "5_", "_5", "5__0", "5_.0", "5._0",
            "5e", "5e+", "e5", ".", "-", "+", "5 0", "50a", "١٢", "5e1_",
        ] {
            assert_eq!(v(text), None, "{text:?}");
        }
    }
}
