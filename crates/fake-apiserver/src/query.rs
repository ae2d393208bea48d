//! The query parameters the fake honours, parsed once per request.
//!
//! Honoured: `watch`, `resourceVersion`, `resourceVersionMatch`, `limit`, `continue`,
//! `labelSelector`, `fieldSelector`, `timeoutSeconds`, `allowWatchBookmarks`,
//! `sendInitialEvents`, `dryRun`. Ignored, as harmless here: `fieldManager`, `fieldValidation`,
//! `force`, `pretty`, `propagationPolicy`. Unknown parameters are ignored (the real server too).

use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub struct Query {
    pub watch: bool,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub timeout: Option<Duration>,
    pub bookmarks: bool,
    pub send_initial_events: Option<bool>,
    pub dry_run: bool,
}

impl Query {
    pub fn parse(query: &str) -> Result<Self, ApiError> {
        let mut q = Query::default();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            q.set(&key, value.into_owned())?;
        }
        Ok(q)
    }

    fn set(&mut self, key: &str, value: String) -> Result<(), ApiError> {
        match key {
            "watch" => self.watch = flag(key, &value)?,
            "resourceVersion" => self.resource_version = Some(value).filter(|v| !v.is_empty()),
            "resourceVersionMatch" => self.resource_version_match = Some(value),
            "limit" => self.limit = Some(number(key, &value)?).filter(|n| *n > 0),
            "continue" => self.continue_token = Some(value).filter(|v| !v.is_empty()),
            "labelSelector" => self.labels = LabelSelector::parse(&value).map_err(bad)?,
            "fieldSelector" => self.fields = FieldSelector::parse(&value).map_err(bad)?,
            "timeoutSeconds" => {
                self.timeout = Some(Duration::from_secs(number(key, &value)? as u64));
            }
            "allowWatchBookmarks" => self.bookmarks = flag(key, &value)?,
            "sendInitialEvents" => self.send_initial_events = Some(flag(key, &value)?),
            "dryRun" => self.dry_run = value == "All",
            _ => {}
        }
        Ok(())
    }

    /// The `resourceVersion` as a number; `None` when unset or `"0"` ("any").
    pub fn exact_version(&self) -> Result<Option<u64>, ApiError> {
        match self.resource_version.as_deref() {
            None | Some("0") => Ok(None),
            Some(rv) => rv
                .parse()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}"))),
        }
    }
}

fn bad(e: crate::selector::SelectorError) -> ApiError {
    ApiError::bad_request(e.to_string())
}

fn flag(key: &str, value: &str) -> Result<bool, ApiError> {
    match value {
        "true" | "1" => Ok(true),
        "false" | "0" | "" => Ok(false),
        _ => Err(ApiError::bad_request(format!(
            "{key}: invalid boolean {value:?}"
        ))),
    }
}

fn number(key: &str, value: &str) -> Result<usize, ApiError> {
    value
        .parse()
        .map_err(|_| ApiError::bad_request(format!("{key}: invalid number {value:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watcher_query_is_understood() {
        let q = Query::parse(
            "watch=true&timeoutSeconds=290&labelSelector=app%3Dsite&allowWatchBookmarks=true&resourceVersion=12",
        )
        .expect("parses");
        assert!(q.watch && q.bookmarks);
        assert_eq!(q.timeout, Some(Duration::from_secs(290)));
        assert_eq!(q.exact_version().ok(), Some(Some(12)));
    }

    #[test]
    fn bad_values_are_bad_requests() {
        assert_eq!(Query::parse("limit=x").err().map(|e| e.code), Some(400));
        assert_eq!(Query::parse("watch=maybe").err().map(|e| e.code), Some(400));
        assert_eq!(
            Query::parse("labelSelector=a%20in%20b")
                .err()
                .map(|e| e.code),
            Some(400)
        );
        let q = Query::parse("resourceVersion=abc").expect("parses");
        assert!(q.exact_version().is_err());
    }
}
