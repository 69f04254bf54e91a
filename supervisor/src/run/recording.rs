//! `open-inspect record URL --seconds N`: the sandbox's headless Chromium opens a page and
//! records it for a few seconds through the DevTools protocol's screencast (a frame each
//! time the page is drawn anew), and the frames become an animated GIF for the session's
//! people. A page that stays still is one long frame; a page that never loads is given up
//! on after its timeout, with the browser killed.

use super::browser::Browser;
use super::screenshot::checked;
use anyhow::{bail, Context, Result};
use base64::Engine;
use image::codecs::gif::{GifEncoder, Repeat};
use image::{Delay, Frame};
use inspect_protocol::media::{ScreenshotRequest, MAX_MEDIA_BYTES};
use serde_json::json;
use std::time::{Duration, Instant};

/// Frames kept each second at most, and the width they are drawn at most (a GIF's size
/// grows with both).
const MAX_FPS: f64 = 8.0;
const MAX_GIF_WIDTH: u32 = 800;

/// One frame as the screencast sent it: a JPEG and when it was drawn (seconds).
struct Shot {
    jpeg: Vec<u8>,
    at: f64,
}

/// Records the page; the GIF's bytes.
pub async fn record(req: &ScreenshotRequest, scratch: &std::path::Path) -> Result<Vec<u8>> {
    let (w, h, timeout) = checked(req)?;
    let seconds = req.seconds.context("a recording needs its seconds")?;
    let browser = Browser::launch_sized(scratch, None, w, h).await?;
    browser.open(req.url.trim(), timeout).await?;
    let (shots, end) = screencast(&browser, w, h, seconds).await?;
    drop(browser);
    let gif = tokio::task::spawn_blocking(move || encode(&shots, end))
        .await
        .context("encoding the recording")??;
    if gif.len() > MAX_MEDIA_BYTES {
        bail!(
            "the recording is {} MiB, more than the {} MiB a picture may be: record fewer seconds or a smaller window",
            gif.len() / 1024 / 1024,
            MAX_MEDIA_BYTES / 1024 / 1024
        );
    }
    Ok(gif)
}

/// Keeps the loaded page's screencast frames for `seconds`. The frames and the moment the
/// recording ended.
async fn screencast(browser: &Browser, w: u32, h: u32, seconds: u32) -> Result<(Vec<Shot>, f64)> {
    let mut events = browser.events();
    browser
        .call(
            "Page.startScreencast",
            json!({"format": "jpeg", "quality": 80, "maxWidth": w, "maxHeight": h, "everyNthFrame": 1}),
        )
        .await?;
    let started = Instant::now();
    let until = started + Duration::from_secs(u64::from(seconds));
    let mut shots: Vec<Shot> = Vec::new();
    let mut first_at: Option<f64> = None;
    let max = (MAX_FPS * f64::from(seconds)).ceil() as usize + 1;
    while let Ok(Some(v)) = tokio::time::timeout(
        until.saturating_duration_since(Instant::now()),
        events.recv(),
    )
    .await
    {
        if v["method"] != "Page.screencastFrame" {
            continue;
        }
        let p = &v["params"];
        // Every frame is answered, or the screencast stops sending.
        browser
            .call(
                "Page.screencastFrameAck",
                json!({"sessionId": p["sessionId"]}),
            )
            .await?;
        let now = started.elapsed().as_secs_f64();
        let at = p["metadata"]["timestamp"]
            .as_f64()
            .map(|t| t - *first_at.get_or_insert(t - now))
            .unwrap_or(now);
        let too_soon = shots.last().is_some_and(|s| at - s.at < 1.0 / MAX_FPS);
        if too_soon || shots.len() >= max {
            continue;
        }
        let jpeg = base64::engine::general_purpose::STANDARD
            .decode(p["data"].as_str().unwrap_or_default())
            .context("a frame that is not base64")?;
        shots.push(Shot { jpeg, at });
    }
    let end = started.elapsed().as_secs_f64();
    if shots.is_empty() {
        // Nothing was drawn while recording: the page as it stands, for the whole time.
        shots.push(Shot {
            jpeg: browser
                .capture(json!({"format": "jpeg", "quality": 80}))
                .await?,
            at: 0.0,
        });
    }
    Ok((shots, end))
}

/// The frames as an animated GIF that loops, each shown until the next was drawn (the last
/// until the recording ended), at most [`MAX_GIF_WIDTH`] wide.
fn encode(shots: &[Shot], end: f64) -> Result<Vec<u8>> {
    if shots.is_empty() {
        bail!("Chromium drew nothing to record");
    }
    let mut out = Vec::new();
    {
        let mut gif = GifEncoder::new_with_speed(&mut out, 10);
        gif.set_repeat(Repeat::Infinite)?;
        for (i, shot) in shots.iter().enumerate() {
            let mut rgba =
                image::load_from_memory_with_format(&shot.jpeg, image::ImageFormat::Jpeg)
                    .context("a frame that is not a JPEG")?
                    .to_rgba8();
            if rgba.width() > MAX_GIF_WIDTH {
                let h = rgba.height() * MAX_GIF_WIDTH / rgba.width();
                rgba = image::imageops::resize(
                    &rgba,
                    MAX_GIF_WIDTH,
                    h.max(1),
                    image::imageops::FilterType::Triangle,
                );
            }
            let next = shots.get(i + 1).map_or(end, |n| n.at);
            let ms = ((next - shot.at) * 1000.0).clamp(20.0, 60_000.0) as u32;
            gif.encode_frame(Frame::from_parts(
                rgba,
                0,
                0,
                Delay::from_numer_denom_ms(ms, 1),
            ))?;
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn jpeg(shade: u8) -> Vec<u8> {
        let img = image::RgbImage::from_pixel(1000, 500, image::Rgb([shade, 0, 0]));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
        out.into_inner()
    }

    #[test]
    fn frames_become_a_looping_gif_that_keeps_their_timing() {
        let shots = vec![
            Shot {
                jpeg: jpeg(10),
                at: 0.0,
            },
            Shot {
                jpeg: jpeg(200),
                at: 0.5,
            },
        ];
        let gif = encode(&shots, 2.0).unwrap();
        assert!(gif.starts_with(b"GIF89a"));
        let decoder =
            image::codecs::gif::GifDecoder::new(std::io::Cursor::new(gif.as_slice())).unwrap();
        use image::AnimationDecoder;
        let frames: Vec<_> = decoder.into_frames().collect::<Result<_, _>>().unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].buffer().width(), MAX_GIF_WIDTH, "scaled down");
        let ms = |f: &Frame| {
            let (n, d) = f.delay().numer_denom_ms();
            n / d
        };
        assert_eq!((ms(&frames[0]), ms(&frames[1])), (500, 1500));
        assert!(encode(&[], 1.0).is_err());
    }
}
