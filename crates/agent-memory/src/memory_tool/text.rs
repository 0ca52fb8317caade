//! The texts of successful commands, and the formats they share: numbered lines and sizes.
//! Each follows the reference implementation byte for byte.

/// Line numbers are right-aligned in six columns, then a tab.
const LINE_NUMBER_WIDTH: usize = 6;

/// What a directory listing shows as a directory's size. A directory here is only a key
/// prefix and has no size of its own, so every directory shows what one block of a typical
/// Linux file system shows (4,096 bytes).
pub(super) const DIRECTORY_SIZE: &str = "4K";

/// `lines` numbered from `first`, one per line.
pub(super) fn numbered<'a>(lines: impl IntoIterator<Item = &'a str>, first: usize) -> String {
    let mut out = String::new();
    for (i, line) in lines.into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("{:>LINE_NUMBER_WIDTH$}\t{line}", first + i));
    }
    out
}

/// A size as the listing shows it: bytes, then K, M and G by powers of 1,024, whole numbers
/// without a decimal and others with one, rounded half to even (`0B`, `512B`, `1K`, `1.5K`).
pub(super) fn size(bytes: usize) -> String {
    if bytes == 0 {
        return "0B".to_owned();
    }
    const UNITS: [&str; 4] = ["B", "K", "M", "G"];
    let bits = usize::BITS - bytes.leading_zeros();
    let index = usize::try_from((bits - 1) / 10).unwrap_or(0).min(UNITS.len() - 1);
    let unit = 1usize << (10 * index);
    if bytes.is_multiple_of(unit) {
        return format!("{}{}", bytes / unit, UNITS[index]);
    }
    // Tenths of the unit, rounded half to even, in integers: the value is an exact binary
    // fraction, so this is what correctly rounded decimal formatting gives.
    let scaled = bytes as u128 * 10;
    let unit = unit as u128;
    let (mut tenths, rest) = (scaled / unit, scaled % unit);
    if rest * 2 > unit || (rest * 2 == unit && tenths % 2 == 1) {
        tenths += 1;
    }
    format!("{}.{}{}", tenths / 10, tenths % 10, UNITS[index])
}

pub(super) fn created(path: &str) -> String {
    format!("File created successfully at: {path}")
}

/// After `str_replace`: the lines around the change, numbered.
pub(super) fn replaced(snippet: &str) -> String {
    format!(
        "The memory file has been edited. Here is the snippet showing the change (with line \
         numbers):\n{snippet}"
    )
}

pub(super) fn inserted(path: &str) -> String {
    format!("The file {path} has been edited.")
}

pub(super) fn deleted(path: &str) -> String {
    format!("Successfully deleted {path}")
}

pub(super) fn renamed(old_path: &str, new_path: &str) -> String {
    format!("Successfully renamed {old_path} to {new_path}")
}

pub(super) fn file_header(path: &str) -> String {
    format!("Here's the content of {path} with line numbers:\n")
}

pub(super) fn listing_header(path: &str) -> String {
    format!(
        "Here're the files and directories up to 2 levels deep in {path}, excluding hidden \
         items:\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_like_the_reference() {
        let cases = [
            (0, "0B"),
            (1, "1B"),
            (1023, "1023B"),
            (1024, "1K"),
            (1100, "1.1K"),
            (1280, "1.2K"), // 1.25: half to even
            (1792, "1.8K"), // 1.75: half to even
            (1536, "1.5K"),
            (2047, "2.0K"),
            (4096, "4K"),
            (65_536, "64K"),
            (1_048_575, "1024.0K"),
            (1_048_576, "1M"),
        ];
        for (bytes, shown) in cases {
            assert_eq!(size(bytes), shown, "{bytes} bytes");
        }
    }

    #[test]
    fn lines_are_numbered_in_six_columns() {
        assert_eq!(numbered(["a", "", "c"], 9), "     9\ta\n    10\t\n    11\tc");
        assert_eq!(numbered(std::iter::empty(), 1), "");
    }
}
