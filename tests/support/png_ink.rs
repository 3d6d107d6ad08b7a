//! What a screenshot shows, read from its PNG (tests/page.rs, tests/history.rs).

use std::path::Path;

/// Distinct colours and the share of pixels that are not white in a PNG.
pub fn ink(png_path: &Path) -> (usize, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png_path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
    let colours: std::collections::HashSet<&[u8]> = pixels.iter().copied().collect();
    let inked = pixels.iter().filter(|p| p[..3].iter().any(|&c| c < 240)).count();
    (colours.len(), inked as f64 / pixels.len() as f64)
}
