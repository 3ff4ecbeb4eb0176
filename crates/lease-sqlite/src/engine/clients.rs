//! The client calls of [`SqliteBackend`] that run on lease-core's engine over its own
//! connection: steps, stores, effects and start requests, the rules written once.

use lease_core::{
    EffectClient, ForwardEffect, ForwardHeap, ForwardStart, ForwardStore, HeapClient, StartClient,
    StoreClient,
};

use crate::backend::SqliteBackend;

impl ForwardHeap for SqliteBackend {
    fn inner_heap(&self) -> &dyn HeapClient {
        self.engine()
    }
}

impl ForwardStore for SqliteBackend {
    fn inner_store(&self) -> &dyn StoreClient {
        self.engine()
    }
}

impl ForwardEffect for SqliteBackend {
    fn inner_effect(&self) -> &dyn EffectClient {
        self.engine()
    }
}

impl ForwardStart for SqliteBackend {
    fn inner_start(&self) -> &dyn StartClient {
        self.engine()
    }
}
