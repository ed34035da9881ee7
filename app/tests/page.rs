//! The console's page in Chromium (`make page-test`, in `make test`): the page built for wasm32
//! loads a tiny fixture GGUF from `?model=`, answers `?prompt=` greedily on WebGPU, and its
//! answer must be the one the native console gives the same chat. A screenshot of the page is
//! read back with tesseract and must show that answer.
//!
//! Chromium runs headful on its own Xvfb display: headless, it does not composite WebGPU
//! canvases, so a screenshot would show an empty page. It is driven over WebDriver
//! (chromedriver) with webdriver.json's flags; the page and the fixture come from a small file
//! server in this test.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use eframe::egui;
use serde_json::{json, Value};
use wginfer_console::{ConsoleApp, Options};

/// Its greedy answer to PROMPT is plain ASCII ("Lackack…"), which OCR can read.
const FIXTURE: &str = "tiny-gemma3-q8_0.gguf";
const PROMPT: &str = "Tell me a story";
const MAX_TOKENS: usize = 10;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
#[ignore = "needs the page built, chromium, chromedriver, Xvfb and tesseract: make page-test"]
fn the_page_answers_like_the_native_console_and_shows_it() {
    let page = std::env::var_os("WGINFER_PAGE_DIR").map_or_else(|| workspace().join("target/web-test"), PathBuf::from);
    assert!(page.join("index.html").exists(), "no page in {} (make page-test builds it)", page.display());
    let expected = native_answer();
    assert!(!expected.trim().is_empty(), "the native console answered nothing");

    let server = serve(page, workspace().join("tests/fixtures/gguf"));
    let browser = Browser::start();
    let query = format!(
        "?model=fixtures/{FIXTURE}&prompt={}&temperature=0&max_tokens={MAX_TOKENS}",
        PROMPT.replace(' ', "%20")
    );
    browser.go(&format!("http://{server}/index.html{query}"));

    let start = Instant::now();
    loop {
        let state = browser.script("return document.getElementById('transcript').getAttribute('data-state')");
        let finished = browser.script("return document.querySelector('#transcript .speed') !== null");
        match (state.as_str(), finished.as_bool()) {
            (Some("failed"), _) => panic!("the page failed: {}", browser.transcript()),
            (Some("ready"), Some(true)) => break,
            _ => {}
        }
        assert!(start.elapsed() < Duration::from_secs(300), "no answer after 300 s: {}", browser.transcript());
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("the page answered after {:.1} s: {}", start.elapsed().as_secs_f64(), browser.transcript());

    let answer = browser.script("return document.querySelector('#transcript .assistant').textContent");
    assert_eq!(answer.as_str(), Some(expected.as_str()), "the page's answer differs from the native console's");

    let png = workspace().join("target/page-test/console.png");
    std::fs::create_dir_all(png.parent().unwrap()).unwrap();
    std::fs::write(&png, browser.screenshot()).unwrap();
    let seen = ocr(&png);
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    assert!(
        squeeze(&seen).contains(&squeeze(&expected)),
        "the screenshot {} does not show the answer {expected:?}; tesseract read:\n{seen}",
        png.display()
    );
}

/// The same chat in the native console, headless (egui_kittest), on the native adapter.
fn native_answer() -> String {
    let opts = Options {
        model: Some(workspace().join("tests/fixtures/gguf").join(FIXTURE)),
        prompt: Some(PROMPT.into()),
        temperature: Some(0.0),
        max_tokens: Some(MAX_TOKENS),
        ..Default::default()
    };
    let app = ConsoleApp::new(&egui::Context::default(), opts);
    let mut h = egui_kittest::Harness::builder().build_ui_state(|ui, app: &mut ConsoleApp| app.ui(ui), app);
    let start = Instant::now();
    while h.state().finished.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(120), "the native console did not answer");
        assert!(h.state().load_error.is_none() && h.state().error.is_none(), "the native console failed");
        h.step();
        std::thread::sleep(Duration::from_millis(10));
    }
    h.state().messages.last().expect("an answer").text.clone()
}

/// Serves `page` at `/` and `fixtures` at `/fixtures/` on a free local port (GET only).
fn serve(page: PathBuf, fixtures: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (page, fixtures) = (page.clone(), fixtures.clone());
            std::thread::spawn(move || answer(stream, &page, &fixtures));
        }
    });
    addr
}

fn answer(mut stream: TcpStream, page: &Path, fixtures: &Path) {
    let mut line = String::new();
    if BufReader::new(&stream).read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").split('?').next().unwrap_or("/");
    let file = match path.strip_prefix("/fixtures/") {
        Some(name) => fixtures.join(name),
        None => page.join(path.trim_start_matches('/')),
    };
    let body = if path.contains("..") { None } else { std::fs::read(&file).ok() };
    let reply = match body {
        Some(body) => {
            let kind = match file.extension().and_then(|e| e.to_str()) {
                Some("html") => "text/html",
                Some("js") => "text/javascript",
                Some("wasm") => "application/wasm",
                _ => "application/octet-stream",
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            [head.into_bytes(), body].concat()
        }
        _ => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
    };
    let _ = stream.write_all(&reply);
}

/// Xvfb, chromedriver on it, and one Chromium session; all stopped on drop.
struct Browser {
    xvfb: Child,
    driver: Child,
    base: String,
    http: reqwest::blocking::Client,
}

impl Browser {
    fn start() -> Browser {
        // -displayfd: Xvfb picks a free display and writes its number on stdout.
        let mut xvfb = Command::new("Xvfb")
            .args(["-displayfd", "1", "-screen", "0", "1400x900x24"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb (make page-test installs it)");
        let mut display = String::new();
        BufReader::new(xvfb.stdout.take().unwrap()).read_line(&mut display).unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .env("DISPLAY", format!(":{}", display.trim()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (make page-test installs it)");
        let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
        let mut b = Browser { xvfb, driver, base: format!("http://127.0.0.1:{port}"), http };
        let start = Instant::now();
        while b.http.get(format!("{}/status", b.base)).send().is_err() {
            assert!(start.elapsed() < Duration::from_secs(30), "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let flags: Value = serde_json::from_slice(&std::fs::read(workspace().join("webdriver.json")).unwrap()).unwrap();
        let mut args = flags["goog:chromeOptions"]["args"].as_array().unwrap().clone();
        // As root Chromium needs --no-sandbox; the window is the screenshot's size.
        args.extend([json!("--no-sandbox"), json!("--window-size=1400,900")]);
        let session = b.call(
            "POST",
            "/session",
            json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {"args": args}}}}),
        );
        let id = session["sessionId"].as_str().expect("a WebDriver session").to_string();
        b.base = format!("{}/session/{id}", b.base);
        b
    }

    fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "POST" => self.http.post(url).json(&body),
            "DELETE" => self.http.delete(url),
            _ => self.http.get(url),
        };
        let reply: Value =
            req.send().and_then(|r| r.json()).unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
        if let Some(error) = reply["value"].get("error") {
            panic!("WebDriver {method} {path}: {error}: {}", reply["value"]["message"]);
        }
        reply["value"].clone()
    }

    fn go(&self, url: &str) {
        self.call("POST", "/url", json!({ "url": url }));
    }

    fn script(&self, js: &str) -> Value {
        self.call("POST", "/execute/sync", json!({"script": js, "args": []}))
    }

    fn transcript(&self) -> String {
        self.script("return document.getElementById('transcript').innerText").as_str().unwrap_or_default().to_string()
    }

    fn screenshot(&self) -> Vec<u8> {
        let b64 = self.call("GET", "/screenshot", Value::Null);
        base64::engine::general_purpose::STANDARD.decode(b64.as_str().unwrap()).unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.http.delete(&self.base).send();
        let _ = self.driver.kill();
        let _ = self.xvfb.kill();
        let _ = (self.driver.wait(), self.xvfb.wait());
    }
}

/// The text tesseract reads in a PNG, scaled up 3x first (egui's text is small for it).
fn ocr(png: &Path) -> String {
    let img = image::open(png).unwrap();
    let big = img.resize(img.width() * 3, img.height() * 3, image::imageops::FilterType::Lanczos3);
    let scaled = png.with_extension("x3.png");
    big.save(&scaled).unwrap();
    let out = Command::new("tesseract")
        .arg(&scaled)
        .arg("-")
        .stderr(Stdio::null())
        .output()
        .expect("tesseract (make page-test installs it)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
