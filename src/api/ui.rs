//! The browser pages `ponder serve` hosts: the playground (`/`, also `/playground`: ask a
//! question, watch the search tree grow over the streaming API), the trace viewer (`/trace`: open
//! a saved `Outcome` JSON offline) and the eval report page (`/report`: the harness's
//! `report.json` / `results.jsonl` and plot).
//!
//! Invariants: every asset is embedded in the binary (`include_str!` of `ui/`), so there is no
//! separate server and nothing to install; every page is sent with a Content-Security-Policy of
//! `'self'` only, so a page can make no request off this server (no CDN, no web fonts). The pages
//! and their assets are open routes ([`is_open`]): they load without an API key; their API calls
//! carry the key a person types in, which the page keeps in memory only.

use std::sync::Arc;

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::AppState;

/// One embedded file and the path it is served at.
#[derive(Debug, Clone, Copy)]
struct Asset {
    path: &'static str,
    mime: &'static str,
    body: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

const PLAYGROUND: &str = include_str!("../../ui/index.html");

/// Everything the pages need, by path.
const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        mime: HTML,
        body: PLAYGROUND,
    },
    Asset {
        path: "/playground",
        mime: HTML,
        body: PLAYGROUND,
    },
    Asset {
        path: "/trace",
        mime: HTML,
        body: include_str!("../../ui/trace.html"),
    },
    Asset {
        path: "/report",
        mime: HTML,
        body: include_str!("../../ui/report.html"),
    },
    Asset {
        path: "/ui/app.css",
        mime: CSS,
        body: include_str!("../../ui/app.css"),
    },
    Asset {
        path: "/ui/common.js",
        mime: JS,
        body: include_str!("../../ui/common.js"),
    },
    Asset {
        path: "/ui/tree.js",
        mime: JS,
        body: include_str!("../../ui/tree.js"),
    },
    Asset {
        path: "/ui/playground.js",
        mime: JS,
        body: include_str!("../../ui/playground.js"),
    },
    Asset {
        path: "/ui/trace.js",
        mime: JS,
        body: include_str!("../../ui/trace.js"),
    },
    Asset {
        path: "/ui/report.js",
        mime: JS,
        body: include_str!("../../ui/report.js"),
    },
    Asset {
        path: "/ui/icon.svg",
        mime: "image/svg+xml",
        body: include_str!("../../ui/icon.svg"),
    },
];

/// Same-origin only: scripts, styles, API calls; images also from `blob:`/`data:` (a plot the
/// report page opens from disk).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The pages' routes.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    ASSETS.iter().fold(Router::new(), |router, asset| {
        let asset = *asset;
        router.route(asset.path, get(move || async move { serve(asset) }))
    })
}

/// Whether `path` is a page or asset (served without an API key).
pub(crate) fn is_open(path: &str) -> bool {
    ASSETS.iter().any(|a| a.path == path)
}

fn serve(asset: Asset) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, asset.mime),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        asset.body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `/ui/…` path a page or script names (in `src="…"`, `href="…"`).
    fn referenced(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for attr in ["src=\"", "href=\""] {
            for (at, _) in text.match_indices(attr) {
                let rest = &text[at + attr.len()..];
                if let Some(end) = rest.find('"') {
                    out.push(&rest[..end]);
                }
            }
        }
        out
    }

    #[test]
    fn pages_reference_only_embedded_assets_and_nothing_off_the_server() {
        for asset in ASSETS {
            for url in referenced(asset.body) {
                assert!(
                    url.starts_with('/') || url.starts_with('#'),
                    "{} references {url}",
                    asset.path
                );
                if url.starts_with("/ui/") {
                    assert!(
                        is_open(url),
                        "{} references {url}, which is not embedded",
                        asset.path
                    );
                }
            }
            for external in ["http://", "https://", "//fonts.", "@import"] {
                let hits: Vec<_> = asset
                    .body
                    .match_indices(external)
                    .map(|(i, _)| &asset.body[i.saturating_sub(40)..(i + 60).min(asset.body.len())])
                    .collect();
                // The SVG namespace is an identifier, not a request.
                assert!(
                    hits.iter().all(|h| h.contains("www.w3.org/2000/svg")),
                    "{} mentions {external}: {hits:?}",
                    asset.path
                );
            }
        }
    }

    #[test]
    fn pages_and_assets_are_open_and_the_api_is_not() {
        for path in [
            "/",
            "/playground",
            "/trace",
            "/report",
            "/ui/app.css",
            "/ui/tree.js",
        ] {
            assert!(is_open(path), "{path}");
        }
        for path in [
            "/v1/reason",
            "/v1/strategies",
            "/metrics",
            "/ui/",
            "/ui/../metrics",
            "/trace/x",
        ] {
            assert!(!is_open(path), "{path}");
        }
    }
}
