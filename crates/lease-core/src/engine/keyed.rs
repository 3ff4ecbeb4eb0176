//! The engine's per-key policies ([`crate::keyed`]): start rates' claim instants.

use crate::control::LimitScope;
use crate::keyed::RateLimit;

use super::Namespace;

/// [`crate::ExecutionClient::set_rate_limit`]. A key no limit applies to any more forgets
/// its claim instants (they are kept only while a limit applies, so a limit set later
/// counts from then).
pub(super) fn set_rate(namespace: &mut Namespace, scope: &LimitScope, limit: Option<RateLimit>) {
    namespace.rates.set(scope, limit);
    let Namespace {
        rates, rate_starts, ..
    } = namespace;
    rate_starts.retain(|key, _| rates.of(Some(key)).is_some());
}
