//! JPEG files read strictly: a file cut short, even where an end-of-image marker was appended
//! to hide the cut, is refused, never decoded into a grey fill and trained on. Three checks: the
//! file's structure (its markers walked from the start: every scan holds data, the file ends
//! with its end-of-image marker, and the scans code every component, and in a progressive file
//! every coefficient down to its last bit); zune-jpeg's decoder in strict mode, where any of its
//! warnings (a marker where data should be, the file running out) is an error; and that every
//! scan's data holds all the image's blocks. The decoder reads a marker met inside a scan as the
//! end of its data and decodes the blocks that are missing from zero bits, so the file is decoded
//! again with bytes inserted where its last scan's data ends (a file cut short ends in the scan it
//! was cut in; one cut between scans fails the coverage check): a whole scan has decoded its last
//! block before them and gives the same image, a scan cut short reads them and gives another. Bytes go before each of the last
//! scan's restart markers too: a marker met before its interval's blocks are all decoded is one
//! more place a cut can hide.

use image::{DynamicImage, RgbImage};
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;

/// The coefficients of an 8x8 block.
const COEFFICIENTS: usize = 64;

/// What the scans of a frame coded: per component, per coefficient, the lowest bit (successive
/// approximation's Al) reached, None before any scan coded it.
struct Coverage {
    components: Vec<u8>,
    progressive: bool,
    lowest_bit: Vec<[Option<u8>; COEFFICIENTS]>,
}

impl Coverage {
    /// Records a scan of `ids` coding coefficients `ss..=se` down to bit `al`.
    fn scan(&mut self, ids: &[u8], (ss, se, al): (usize, usize, u8)) -> Result<(), String> {
        for id in ids {
            let c = self.components.iter().position(|c| c == id).ok_or("a scan names a component its frame has not")?;
            let (ss, se) = if self.progressive { (ss, se) } else { (0, COEFFICIENTS - 1) };
            for bit in self.lowest_bit[c].get_mut(ss..=se).ok_or("a scan's coefficients are out of range")? {
                *bit = Some(bit.map_or(al, |b| b.min(al)));
            }
        }
        Ok(())
    }

    /// True when every coefficient of every component was coded to its last bit.
    fn complete(&self) -> bool {
        self.lowest_bit.iter().all(|c| c.iter().all(|&b| b == Some(0)))
    }
}

/// The two bytes at `at` as a big-endian number.
fn word(bytes: &[u8], at: usize) -> Option<usize> {
    Some(usize::from(*bytes.get(at)?) << 8 | usize::from(*bytes.get(at + 1)?))
}

/// Where the entropy-coded data that starts at `at` ends: at the first marker that is neither a
/// stuffed byte (FF 00) nor a restart marker (FF D0 to FF D7); None when the file ends first.
/// The restart markers on the way go to `restarts`.
fn scan_end(bytes: &[u8], mut at: usize, restarts: &mut Vec<usize>) -> Option<usize> {
    loop {
        let ff = at + bytes.get(at..)?.iter().position(|&b| b == 0xFF)?;
        match *bytes.get(ff + 1)? {
            0xD0..=0xD7 => {
                restarts.push(ff);
                at = ff + 2;
            }
            0x00 | 0xFF => at = ff + 1,
            _ => return Some(ff),
        }
    }
}

/// Where the markers of a JPEG's last scan are (its restart markers and the marker that ends it),
/// refusing a JPEG whose structure is not whole, saying why.
fn check_structure(bytes: &[u8]) -> Result<Vec<usize>, &'static str> {
    const CUT: &str = "a JPEG cut short (its markers run past the end of the file)";
    let mut frame: Option<Coverage> = None;
    let mut last_scan = Vec::new();
    let mut restart_interval = false;
    let mut at = 2;
    loop {
        // Markers may be preceded by fill bytes FF.
        while bytes.get(at) == Some(&0xFF) && bytes.get(at + 1) == Some(&0xFF) {
            at += 1;
        }
        if bytes.get(at) != Some(&0xFF) {
            return Err(if at >= bytes.len() { CUT } else { "a JPEG with data where a marker should be" });
        }
        let marker = *bytes.get(at + 1).ok_or(CUT)?;
        at += 2;
        match marker {
            0xD9 => break,
            0x01 | 0xD0..=0xD7 => continue,
            _ => {}
        }
        let length = word(bytes, at).filter(|&l| l >= 2).ok_or(CUT)?;
        let segment = bytes.get(at + 2..at + length).ok_or(CUT)?;
        at += length;
        match marker {
            // Start of frame: baseline, extended or progressive Huffman-coded.
            0xC0..=0xC2 => {
                let count = usize::from(*segment.get(5).ok_or(CUT)?);
                let ids: Vec<u8> =
                    (0..count).map(|i| segment.get(6 + 3 * i).copied()).collect::<Option<_>>().ok_or(CUT)?;
                let lowest_bit = vec![[None; COEFFICIENTS]; ids.len()];
                frame = Some(Coverage { components: ids, progressive: marker == 0xC2, lowest_bit });
            }
            0xDA => {
                let coverage = frame.as_mut().ok_or("a JPEG scan before its frame header")?;
                let count = usize::from(*segment.first().ok_or(CUT)?);
                let ids: Vec<u8> =
                    (0..count).map(|i| segment.get(1 + 2 * i).copied()).collect::<Option<_>>().ok_or(CUT)?;
                let tail = segment.get(1 + 2 * count..1 + 2 * count + 3).ok_or(CUT)?;
                let (ss, se, al) = (usize::from(tail[0]), usize::from(tail[1]), tail[2] & 0x0F);
                coverage
                    .scan(&ids, (ss, se, al))
                    .map_err(|_| "a JPEG scan of components or coefficients its frame has not")?;
                let mut markers = Vec::new();
                let end = scan_end(bytes, at, &mut markers).ok_or(CUT)?;
                if end == at {
                    return Err("a JPEG scan that holds no data");
                }
                if !restart_interval && !markers.is_empty() {
                    return Err("a JPEG restart marker where no restart interval is defined");
                }
                markers.push(end);
                last_scan = markers;
                at = end;
            }
            // Define restart interval: restart markers may follow (an interval of 0 disables them).
            0xDD => restart_interval = word(segment, 0).ok_or(CUT)? > 0,
            _ => {}
        }
    }
    match frame {
        None => Err("a JPEG without a frame header (or of a kind not read: lossless, hierarchical, arithmetic-coded)"),
        Some(coverage) if !coverage.complete() => Err(
            "a JPEG whose scans stop before its image is whole (a progressive file cut short, or a component never coded)",
        ),
        Some(_) if last_scan.is_empty() => Err("a JPEG without a scan"),
        Some(_) => Ok(last_scan),
    }
}

/// `bytes` with [`PADDING`] bytes `fill` inserted before each of `markers`.
fn padded(bytes: &[u8], markers: &[usize], fill: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + PADDING * markers.len());
    let mut from = 0;
    for &at in markers {
        out.extend_from_slice(&bytes[from..at]);
        out.extend_from_slice(&[fill; PADDING]);
        from = at;
    }
    out.extend_from_slice(&bytes[from..]);
    out
}

/// Bytes inserted before each marker of the last scan, and the two values they take (neither 0,
/// the bits the decoder makes up, nor FF, a marker's first byte).
const PADDING: usize = 16;
const FILLS: [u8; 2] = [0xAA, 0x55];

/// `bytes`, a JPEG file (it starts with FF D8), decoded strictly to RGB: refused, saying why,
/// when it is not whole, wider or taller than `max_side`, or would take more than `max_bytes`
/// decoded.
pub fn decode_strict(bytes: &[u8], max_side: u32, max_bytes: u64) -> Result<DynamicImage, String> {
    let last_scan = check_structure(bytes).map_err(str::to_string)?;
    let side = max_side as usize;
    let options = DecoderOptions::default()
        .set_strict_mode(true)
        .set_max_width(side)
        .set_max_height(side)
        .jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().map_err(|e| e.to_string())?;
    let need = decoder.output_buffer_size().ok_or("a JPEG too large to decode")?;
    if need as u64 > max_bytes {
        return Err(format!("a JPEG that would take {need} bytes decoded, more than the {max_bytes} one image may"));
    }
    let (w, h) = decoder.dimensions().ok_or("a JPEG without dimensions")?;
    let pixels = decoder.decode().map_err(|e| e.to_string())?;
    for fill in FILLS {
        let bytes = padded(bytes, &last_scan, fill);
        let lenient = options.set_strict_mode(false);
        let again = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(&bytes), lenient).decode();
        if !matches!(&again, Ok(p) if *p == pixels) {
            return Err(
                "a JPEG whose scans stop before its image is whole (cut short, a marker put where its data ends)"
                    .into(),
            );
        }
    }
    RgbImage::from_raw(w as u32, h as u32, pixels)
        .map(DynamicImage::ImageRgb8)
        .ok_or_else(|| "a JPEG whose decoded size does not match its dimensions".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageEncoder, codecs::jpeg::JpegEncoder};

    const SIDE: u32 = 1 << 14;
    const BYTES: u64 = 1 << 29;

    /// A baseline JPEG of `w` x `h` pixels of varied colour (a few kilobytes at 64 x 64).
    fn baseline(w: u32, h: u32) -> Vec<u8> {
        let pixels: Vec<u8> = (0..w * h * 3).map(|i| ((i * 37) ^ (i / 7)) as u8).collect();
        let mut out = Vec::new();
        JpegEncoder::new_with_quality(&mut out, 90).write_image(&pixels, w, h, image::ExtendedColorType::Rgb8).unwrap();
        out
    }

    /// The progressive fixture (tests/data/README.md says how each was made).
    fn progressive() -> Vec<u8> {
        include_bytes!("../tests/data/progressive-16x16.jpg").to_vec()
    }

    /// Every fixture: baseline and progressive, with and without restart markers.
    fn fixtures() -> [Vec<u8>; 4] {
        [
            include_bytes!("../tests/data/baseline-32x32.jpg").to_vec(),
            include_bytes!("../tests/data/restarts-32x32.jpg").to_vec(),
            progressive(),
            include_bytes!("../tests/data/progressive-restarts-32x32.jpg").to_vec(),
        ]
    }

    /// `bytes` cut at `at`, with an end-of-image marker appended to hide the cut.
    fn cut(bytes: &[u8], at: usize) -> Vec<u8> {
        [&bytes[..at], &[0xFF, 0xD9][..]].concat()
    }

    /// Where each start-of-scan marker of `bytes` is.
    fn scans(bytes: &[u8]) -> Vec<usize> {
        bytes.windows(2).enumerate().filter(|(_, w)| *w == [0xFF, 0xDA]).map(|(i, _)| i).collect()
    }

    #[test]
    fn whole_files_decode_as_the_image_crate_decodes_them() {
        for bytes in [vec![baseline(64, 48)], fixtures().to_vec()].concat() {
            let strict = decode_strict(&bytes, SIDE, BYTES).unwrap().to_rgb8();
            let lenient = image::load_from_memory(&bytes).unwrap().to_rgb8();
            assert_eq!(strict.dimensions(), lenient.dimensions());
            assert_eq!(strict.as_raw(), lenient.as_raw());
        }
        assert_eq!(scans(&progressive()).len(), 10);
    }

    #[test]
    fn cuts_hidden_by_an_appended_end_marker_are_refused() {
        let whole = baseline(64, 64);
        assert!(whole.len() > 1200, "{}", whole.len());
        let sos = scans(&whole)[0];
        let header_end = sos + 2 + word(&whole, sos + 2).unwrap();
        let cases = [
            ("600 bytes", cut(&whole, 600)),
            ("half", cut(&whole, whole.len() / 2)),
            ("a scan header with no data", cut(&whole, header_end)),
            ("two bytes of data", cut(&whole, header_end + 2)),
            ("the last kilobyte gone", cut(&whole, whole.len() - 1024)),
        ];
        for (what, bytes) in cases {
            assert!(decode_strict(&bytes, SIDE, BYTES).is_err(), "{what}: decoded");
        }
        // A progressive file cut before its last scan, or inside any scan: refused.
        let prog = progressive();
        let last = *scans(&prog).last().unwrap();
        let e = decode_strict(&cut(&prog, last), SIDE, BYTES).unwrap_err();
        assert!(e.contains("progressive file cut short"), "{e}");
        for at in (scans(&prog)[0] + 2..prog.len() - 2).step_by(7) {
            assert!(decode_strict(&cut(&prog, at), SIDE, BYTES).is_err(), "cut at {at} decoded");
        }
        // And without a marker appended.
        assert!(decode_strict(&whole[..whole.len() / 2], SIDE, BYTES).unwrap_err().contains("cut short"));
    }

    #[test]
    fn every_cut_of_every_fixture_with_markers_appended_is_refused() {
        for (f, bytes) in fixtures().iter().enumerate() {
            let first = scans(bytes)[0];
            for at in first..bytes.len() - 2 {
                for marker in [0xD9, 0xD0, 0xD3, 0xDA, 0xC4] {
                    let cut = [&bytes[..at], &[0xFF, marker, 0xFF, 0xD9][..]].concat();
                    assert!(
                        decode_strict(&cut, SIDE, BYTES).is_err(),
                        "fixture {f} cut at {at} + FF {marker:X} decoded"
                    );
                }
            }
        }
    }

    #[test]
    fn bounds_hold_before_decoding() {
        let bytes = baseline(64, 48);
        assert!(decode_strict(&bytes, 32, BYTES).is_err(), "wider than the side allowed");
        let e = decode_strict(&bytes, SIDE, 64 * 48 * 3 - 1).unwrap_err();
        assert!(e.contains("bytes decoded"), "{e}");
        assert!(decode_strict(&bytes, SIDE, 64 * 48 * 3).is_ok());
    }
}
