//! One execution row as an engine step sees it: the record and history as the table holds
//! them, the record as the step left it, and the delivery events the step recorded; written
//! once, with what the events say of the history in the same `UPDATE` (see
//! `crate::history`).

use std::collections::BTreeMap;

use lease_core::engine::DeliveryEvent;
use lease_core::{
    DeliveryEnd, DeliveryHistory, ErrorNote, ExecutionId, ExecutionRecord, FencingToken, Timestamp,
};
use rusqlite::Connection;

use crate::error::OpResult;
use crate::history::{HistoryWrite, StoredHistory};
use crate::rows;
use crate::scope::Scope;

/// A delivery event kept until its row is written.
pub(super) enum Event {
    Claimed {
        token: FencingToken,
        at: Timestamp,
    },
    Ended {
        end: DeliveryEnd,
        at: Timestamp,
        error: Option<ErrorNote>,
    },
    Expired {
        stored: Box<ExecutionRecord>,
        at: Timestamp,
    },
}

impl Event {
    pub(super) fn of(event: DeliveryEvent<'_>) -> Self {
        match event {
            DeliveryEvent::Claimed { token, at } => Event::Claimed { token, at },
            DeliveryEvent::Ended { end, at, error } => Event::Ended {
                end,
                at,
                error: error.cloned(),
            },
            DeliveryEvent::Expired { stored, at } => Event::Expired {
                stored: Box::new(stored.clone()),
                at,
            },
        }
    }

    fn as_event(&self) -> DeliveryEvent<'_> {
        match self {
            Event::Claimed { token, at } => DeliveryEvent::Claimed {
                token: *token,
                at: *at,
            },
            Event::Ended { end, at, error } => DeliveryEvent::Ended {
                end: *end,
                at: *at,
                error: error.as_ref(),
            },
            Event::Expired { stored, at } => DeliveryEvent::Expired { stored, at: *at },
        }
    }
}

/// One execution row as the step sees it.
pub(super) struct Row {
    /// The record as the table holds it.
    stored: ExecutionRecord,
    /// The history as the table holds it.
    pub(super) history: StoredHistory,
    /// The record as the step left it.
    pub(super) record: ExecutionRecord,
    /// The delivery events the step recorded, oldest first.
    events: Vec<Event>,
}

/// The rows a step has read, by id (written in id order).
pub(super) type Rows = BTreeMap<ExecutionId, Row>;

/// True when the row's columns describe the same delivery for both records (its token, its
/// status, and when an acknowledgement ended it: see `crate::history`).
fn same_row_entry(a: &ExecutionRecord, b: &ExecutionRecord) -> bool {
    a.token == b.token
        && a.status == b.status
        && a.last_delivery_ended_at == b.last_delivery_ended_at
}

impl Row {
    /// A row as read from the table.
    pub(super) fn loaded(stored: ExecutionRecord, history: StoredHistory) -> Self {
        Row {
            record: stored.clone(),
            stored,
            history,
            events: Vec::new(),
        }
    }

    /// The record as the table holds it.
    pub(super) fn stored(&self) -> &ExecutionRecord {
        &self.stored
    }

    /// Keeps `event` for the row's write.
    pub(super) fn record_event(&mut self, event: Event) {
        self.events.push(event);
    }

    /// What the row's write stores of its history. The transitions the drain makes (a
    /// claim, an acknowledgement, a release, a claim taking over an expired lease) each
    /// write what the backend's own row format says of them; any other sequence of events
    /// rewrites the whole history as JSON, which every reader reads the same.
    fn history_write(&self) -> OpResult<HistoryWrite> {
        let (history, stored) = (&self.history, &self.stored);
        match self.events.as_slice() {
            [] if !history.describes_latest() || same_row_entry(stored, &self.record) => {
                Ok(HistoryWrite::default())
            }
            [Event::Claimed { at, .. }] | [Event::Expired { .. }, Event::Claimed { at, .. }] => {
                history.claim(stored, *at)
            }
            [Event::Ended { end, at, error }]
                if *end == DeliveryEnd::Acknowledged && error.is_none() =>
            {
                history.acknowledge(stored, *end, *at)
            }
            [Event::Ended { end, at, error }] => history.end(stored, *end, *at, error.clone()),
            [Event::Expired { .. }] => history.close_expired(stored),
            events => {
                let mut whole = history.read(stored)?;
                for event in events {
                    event.as_event().apply(&mut whole);
                }
                Ok(HistoryWrite {
                    json: Some(crate::history::to_sql(&whole)?),
                    claimed_at: Some(None),
                })
            }
        }
    }

    /// Writes the row when the step changed it; afterwards it reads as stored.
    pub(super) fn write(&mut self, conn: &Connection, scope: &Scope) -> OpResult<()> {
        if self.events.is_empty() && self.record == self.stored {
            return Ok(());
        }
        let ns = scope.namespace.as_str();
        if self.only_lease_moved() && rows::save_lease(conn, ns, &self.record, &scope.policy)? {
            self.stored = self.record.clone();
            return Ok(());
        }
        let write = self.history_write()?;
        rows::save_with(conn, ns, &self.record, &scope.policy, &write)?;
        // The row's own write leaves the input as admitted; only a retry replaces it.
        if self.record.input != self.stored.input
            && let Some(input) = &self.record.input
        {
            rows::set_input(conn, ns, &self.record.id, input)?;
        }
        self.history = self.history.after(&write);
        self.stored = self.record.clone();
        self.events.clear();
        Ok(())
    }
}

impl Row {
    /// True when the step changed nothing but the lease's expiry (a renewal): its write
    /// names only the columns that moved.
    fn only_lease_moved(&self) -> bool {
        if !self.events.is_empty() || self.record.lease_expires_at == self.stored.lease_expires_at {
            return false;
        }
        let mut renewed = self.stored.clone();
        renewed.lease_expires_at = self.record.lease_expires_at;
        renewed == self.record
    }

    /// The stored (not effective) history, as the table holds it.
    pub(super) fn stored_history(&self) -> OpResult<DeliveryHistory> {
        self.history.read(&self.stored)
    }
}
