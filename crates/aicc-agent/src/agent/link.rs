//! The loop's [`Link`] over a client [`Session`]: calls begun without
//! waiting, answers and events from `dispatch` (events in tick order).
use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::Value;
use tokio::time::Instant;

use super::{CallError, Heard, Link, ToolSpec};
use crate::client::manifest::{LlmOffer, NotPermitted};
use crate::client::{ClientError, Session, Update};

pub struct SessionLink {
    pub session: Session,
    /// What the backend is offered: never an operator's tool.
    pub offer: LlmOffer,
}

impl SessionLink {
    pub fn new(session: Session, offer: LlmOffer) -> Self {
        Self { session, offer }
    }
}

/// The manifest's tools as the backend sees them.
pub fn tool_specs(manifest: &serde_json::Map<String, Value>) -> Vec<ToolSpec> {
    manifest
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| {
                    Some(ToolSpec {
                        id: t.get("id")?.as_str()?.to_string(),
                        class: t.get("class").and_then(Value::as_str).unwrap_or("").to_string(),
                        descriptor: t.clone(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Link for SessionLink {
    fn tools(&self) -> Vec<ToolSpec> {
        let manifest = self.session.manifest();
        tool_specs(manifest.raw())
            .into_iter()
            .filter(|spec| {
                manifest.tool(&spec.id).is_some_and(|info| self.offer.withheld(info).is_none())
            })
            .collect()
    }

    fn permits(&self, tool: &str) -> Result<(), (String, String)> {
        let manifest = self.session.manifest();
        if let Some(why) = manifest.tool(tool).and_then(|info| self.offer.withheld(info)) {
            return Err((
                "tool_unknown".to_string(),
                format!("tool '{tool}' is not offered to an agent: {why}"),
            ));
        }
        manifest.permits(tool).map(|_| ()).map_err(|why| {
            let code = match why {
                NotPermitted::NotInManifest { .. } => "tool_unknown",
                NotPermitted::NotGranted { .. } | NotPermitted::NotUsable { .. } => {
                    "tool_unavailable"
                }
            };
            (code.to_string(), why.to_string())
        })
    }

    fn begin_call<'a>(
        &'a mut self,
        tool: &'a str,
        input: &'a Value,
    ) -> BoxFuture<'a, Result<String, ClientError>> {
        self.session.begin_call(tool, input).boxed()
    }

    fn next(&mut self, until: Instant) -> BoxFuture<'_, Result<Vec<Heard>, ClientError>> {
        async move {
            let wake = [Some(until.into_std()), self.session.next_release()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(until.into_std());
            let message = self.session.receive(wake).await?;
            let updates = self.session.dispatch(message).await?;
            Ok(updates
                .into_iter()
                .map(|update| match update {
                    Update::Answer { call_id, outcome } => Heard::Answer {
                        call_id,
                        outcome: outcome
                            .map(|success| {
                                let tick =
                                    success.meta.get("tick").and_then(Value::as_u64).unwrap_or(0);
                                (success.output, tick)
                            })
                            .map_err(|e| CallError {
                                code: e.code,
                                message: e.message,
                                retryable: e.retryable,
                                local: false,
                            }),
                    },
                    Update::Event(event) => Heard::Event {
                        tick: event.tick,
                        topic: event.topic.clone(),
                        message: event.to_json(),
                    },
                })
                .collect())
        }
        .boxed()
    }
}
