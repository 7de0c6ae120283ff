//! Generational handle table.
//!
//! A C handle is never a pointer to Rust memory: it is a 64-bit value
//! `kind << 56 | generation << 32 | index`, cast to an opaque pointer type.
//! The library never dereferences it; it looks the index up in a table and
//! checks the kind and the generation. So a NULL, stale, double-freed, forged
//! or wrong-type handle yields a status instead of undefined behaviour.
//!
//! Each slot's generation is bumped when its object is freed. A handle whose
//! generation is older than its slot's was freed: using it is `StaleHandle`,
//! freeing it again is `DoubleFree`. Generations have 24 bits; a slot would
//! have to be reused 16 million times before an old handle could alias a new one.
//!
//! The table is split into shards, each behind its own reader-writer lock, so
//! that threads submitting work (lookups) rarely contend with each other.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use parking_lot::{RwLock, RwLockReadGuard};

use crate::first_and_rest::FirstAndRest;
use ta::Error;
use ta::Status;
use ta::Tensor;
use ta::{CompletionQueue, Event, Runtime};

/// The type of object a handle refers to (stored in the handle's top byte).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Runtime = 1,
    Tensor = 2,
    Event = 3,
    Cq = 4,
    Error = 5,
    Blocks = 6,
    Mapping = 7,
    Token = 8,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Runtime,
            2 => Kind::Tensor,
            3 => Kind::Event,
            4 => Kind::Cq,
            5 => Kind::Error,
            6 => Kind::Blocks,
            7 => Kind::Mapping,
            8 => Kind::Token,
            _ => return None,
        })
    }
}

/// An object reachable from C.
#[derive(Clone)]
pub(crate) enum Object {
    Runtime(Runtime),
    Tensor(Tensor),
    Event(Event),
    Cq(CompletionQueue),
    Error(Error),
    Blocks(ta::BlockArray),
    /// A host access (`ta_mapping`).
    Mapping(std::sync::Arc<ta::HostAccess>),
    /// An unfinished deferred or external operation (`ta_token`).
    Token(std::sync::Arc<ta::Token>),
}

impl Object {
    fn kind(&self) -> Kind {
        match self {
            Object::Runtime(_) => Kind::Runtime,
            Object::Tensor(_) => Kind::Tensor,
            Object::Event(_) => Kind::Event,
            Object::Cq(_) => Kind::Cq,
            Object::Error(_) => Kind::Error,
            Object::Blocks(_) => Kind::Blocks,
            Object::Mapping(_) => Kind::Mapping,
            Object::Token(_) => Kind::Token,
        }
    }
}

const SHARDS: usize = 16;
const GEN_BITS: u32 = 24;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

struct Slot {
    /// Current generation (1-based); bumped when the object is freed.
    gen: u32,
    obj: Option<Object>,
}

#[derive(Default)]
struct Shard {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// Live handles, all kinds together (for leak checks in tests).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Number of live handles.
pub(crate) fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn table() -> &'static [RwLock<Shard>; SHARDS] {
    static T: OnceLock<[RwLock<Shard>; SHARDS]> = OnceLock::new();
    T.get_or_init(|| std::array::from_fn(|_| RwLock::new(Shard::default())))
}

thread_local! {
    /// Which shard this thread inserts into (spreads threads over shards).
    static HOME: Cell<usize> = Cell::new({
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS
    });
}

struct Decoded {
    kind: u8,
    gen: u32,
    shard: usize,
    slot: usize,
}

fn decode(h: u64) -> Decoded {
    let index = (h & 0xffff_ffff) as usize;
    Decoded { kind: (h >> 56) as u8, gen: ((h >> 32) & GEN_MASK) as u32, shard: index % SHARDS, slot: index / SHARDS }
}

fn encode(kind: Kind, gen: u32, shard: usize, slot: usize) -> Option<u64> {
    let index = slot.checked_mul(SHARDS)?.checked_add(shard)?;
    let index = u32::try_from(index).ok()?;
    Some((kind as u64) << 56 | (gen as u64) << 32 | index as u64)
}

/// Whether this handle allocation fails: the test-only allocation failpoint
/// of the core (feature `failpoints`); never in a normal build.
#[cfg(feature = "failpoints")]
fn handle_fails() -> bool {
    ta::failpoint::hit(ta::failpoint::Site::Handle)
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
fn handle_fails() -> bool {
    false
}

/// Store `obj` and return its handle (`None` only if the table is full).
pub(crate) fn insert(obj: Object) -> Option<u64> {
    if handle_fails() {
        return None;
    }
    let kind = obj.kind();
    let shard = HOME.with(|h| h.get());
    let mut s = table()[shard].write();
    let slot = match s.free.pop() {
        Some(i) => i as usize,
        None => {
            s.slots.push(Slot { gen: 1, obj: None });
            s.slots.len() - 1
        }
    };
    let Some(h) = encode(kind, s.slots[slot].gen, shard, slot) else {
        s.free.push(slot as u32);
        return None;
    };
    s.slots[slot].obj = Some(obj);
    LIVE.fetch_add(1, Ordering::Relaxed);
    Some(h)
}

/// A slot taken for a handle whose object comes later (see [`reserve`]);
/// dropped unfilled, the slot goes back to the table.
pub(crate) struct Reserved {
    shard: usize,
    slot: usize,
}

/// Take a slot for a handle before its object exists, so that making the
/// handle later cannot fail: a submission takes its event's slot before it
/// enrolls the operation (a handle that could not be made after enrolling
/// would report a failure for an operation that runs). `None` only if the
/// table is full. Takes the calling thread's shard's write lock, so never
/// while this thread holds [`Borrows`].
pub(crate) fn reserve() -> Option<Reserved> {
    if handle_fails() {
        return None;
    }
    let shard = HOME.with(|h| h.get());
    let mut s = table()[shard].write();
    let slot = match s.free.pop() {
        Some(i) => i as usize,
        None => {
            s.slots.push(Slot { gen: 1, obj: None });
            s.slots.len() - 1
        }
    };
    // Every kind encodes alike: checking one checks them all.
    if encode(Kind::Event, s.slots[slot].gen, shard, slot).is_none() {
        s.free.push(slot as u32);
        return None;
    }
    // While reserved the slot is empty and on no free list: lookups of any
    // handle to it fail as for a freed one, and no other insert takes it.
    Some(Reserved { shard, slot })
}

impl Reserved {
    /// Store `obj` in the reserved slot and return its handle.
    pub(crate) fn fill(self, obj: Object) -> u64 {
        let me = std::mem::ManuallyDrop::new(self);
        let mut s = table()[me.shard].write();
        let gen = s.slots[me.slot].gen;
        let h = encode(obj.kind(), gen, me.shard, me.slot).expect("checked when reserved");
        s.slots[me.slot].obj = Some(obj);
        LIVE.fetch_add(1, Ordering::Relaxed);
        h
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        table()[self.shard].write().free.push(self.slot as u32);
    }
}

/// Classify a handle that does not name a live object.
fn why_not(d: &Decoded, slot: Option<&Slot>) -> Status {
    match slot {
        Some(s) if d.gen != 0 && d.gen < s.gen => Status::StaleHandle,
        _ => Status::InvalidHandle,
    }
}

/// The object behind `h`, which must be of `kind`.
pub(crate) fn get(h: u64, kind: Kind) -> Result<Object, Status> {
    if h == 0 {
        return Err(Status::NullHandle);
    }
    let d = decode(h);
    match Kind::from_u8(d.kind) {
        None => return Err(Status::InvalidHandle),
        Some(k) if k != kind => {
            // Only call it a wrong type if it really names a live object of that type.
            return Err(match lookup(&d) {
                Ok(_) => Status::WrongHandleType,
                Err(s) => s,
            });
        }
        Some(_) => {}
    }
    lookup(&d)
}

fn lookup(d: &Decoded) -> Result<Object, Status> {
    // Recursive: the caller may hold a borrowed object of this shard (see `borrow`).
    let s = table()[d.shard].read_recursive();
    let slot = s.slots.get(d.slot);
    match slot {
        Some(Slot { gen, obj: Some(o) }) if *gen == d.gen && o.kind() as u8 == d.kind => Ok(o.clone()),
        _ => Err(why_not(d, slot)),
    }
}

/// The objects one call uses, borrowed in place: unlike [`get`] it takes no
/// reference count (a submission then touches an object's count only where
/// it keeps a reference). The handles' shards stay read-locked, one lock per
/// shard (a call's handles were usually all made by one thread, so they share
/// a shard), while the `Borrows` lives, so a caller holds it for one call
/// only, and neither creates nor frees a handle, nor runs user code,
/// meanwhile (those may take a write lock, which would wait for this thread).
pub(crate) struct Borrows {
    /// The shards locked (a call's handles were usually all made by one
    /// thread: one shard).
    guards: FirstAndRest<(usize, RwLockReadGuard<'static, Shard>)>,
}

impl Borrows {
    pub(crate) fn new() -> Borrows {
        Borrows { guards: FirstAndRest::new() }
    }

    /// Read-lock the shard of `h`, unless locked already (nothing for NULL).
    /// Every handle passed to [`Borrows::get`] must be locked first.
    /// Inlined: a submission locks each of its handles' shards (nearly
    /// always the one it has locked already).
    #[inline(always)]
    pub(crate) fn lock(&mut self, h: u64) {
        if h == 0 {
            return;
        }
        let shard = decode(h).shard;
        if self.shard(shard).is_none() {
            // Recursive: a writer waiting on the shard does not block this
            // thread's lock on it, even when this thread holds the shard in
            // another `Borrows` (writers hold no other lock).
            self.guards.push((shard, table()[shard].read_recursive()));
        }
    }

    /// The locked shard `shard`, if it is locked.
    #[inline(always)]
    fn shard(&self, shard: usize) -> Option<&Shard> {
        self.guards.find(|(s, _)| *s == shard).map(|(_, g)| &**g)
    }

    /// What `pick` finds in the object behind `h`, a live handle of `kind`
    /// (`cast::borrow_as` picks the handle type's Rust object); otherwise
    /// the status [`Borrows::get`] classifies. Inlined into each submission:
    /// the live handle's path is a few compares (through `get`, with its
    /// decoding of the kind and match on the object, about 70 instructions).
    #[inline(always)]
    pub(crate) fn get_with<'b, T>(
        &'b self,
        h: u64,
        kind: Kind,
        pick: impl FnOnce(&'b Object) -> Option<&'b T>,
    ) -> Result<&'b T, Status> {
        let d = decode(h);
        if h != 0 && d.kind == kind as u8 {
            if let Some(Slot { gen, obj: Some(o) }) = self.shard(d.shard).and_then(|s| s.slots.get(d.slot)) {
                if *gen == d.gen {
                    if let Some(x) = pick(o) {
                        return Ok(x);
                    }
                }
            }
        }
        Err(self.not_live(h, kind))
    }

    /// Why `h` is not a live handle of `kind` (see [`Borrows::get_with`]).
    #[cold]
    #[inline(never)]
    fn not_live(&self, h: u64, kind: Kind) -> Status {
        // (A live object of the right kind has the type: `Internal` is unreachable.)
        self.get(h, kind).err().unwrap_or(Status::Internal)
    }

    /// The object behind `h`, which must be of `kind`, classified as [`get`]
    /// does when it is not a live object of that kind.
    pub(crate) fn get(&self, h: u64, kind: Kind) -> Result<&Object, Status> {
        if h == 0 {
            return Err(Status::NullHandle);
        }
        let d = decode(h);
        if Kind::from_u8(d.kind) != Some(kind) {
            return Err(get(h, kind).err().unwrap_or(Status::WrongHandleType));
        }
        let Some(s) = self.shard(d.shard) else {
            // A caller bug (the handle was not locked first), not the user's.
            return Err(Status::Internal);
        };
        match s.slots.get(d.slot) {
            Some(Slot { gen, obj: Some(o) }) if *gen == d.gen && o.kind() as u8 == d.kind => Ok(o),
            slot => Err(why_not(&d, slot)),
        }
    }
}

/// Remove the object behind `h` (of `kind`) and return it, with the
/// statuses of [`remove`] (NULL is `NullHandle` here: the caller needs the
/// object). Of two threads taking one handle, one gets the object.
pub(crate) fn take(h: u64, kind: Kind) -> Result<Object, Status> {
    if h == 0 {
        return Err(Status::NullHandle);
    }
    let d = decode(h);
    match Kind::from_u8(d.kind) {
        None => return Err(Status::InvalidHandle),
        Some(k) if k != kind => {
            return Err(match lookup(&d) {
                Ok(_) => Status::WrongHandleType,
                Err(Status::StaleHandle) => Status::DoubleFree,
                Err(s) => s,
            })
        }
        Some(_) => {}
    }
    let mut s = table()[d.shard].write();
    let Some(slot) = s.slots.get_mut(d.slot) else {
        return Err(Status::InvalidHandle);
    };
    if d.gen == 0 || d.gen > slot.gen || slot.obj.is_none() && d.gen == slot.gen {
        return Err(Status::InvalidHandle);
    }
    if d.gen < slot.gen {
        return Err(Status::DoubleFree);
    }
    let obj = slot.obj.take().expect("checked above");
    slot.gen = if slot.gen as u64 == GEN_MASK { 1 } else { slot.gen + 1 };
    s.free.push(d.slot as u32);
    LIVE.fetch_sub(1, Ordering::Relaxed);
    // (The caller drops the object after the table lock is gone.)
    Ok(obj)
}

/// Free the object behind `h` (of `kind`). NULL is a no-op. The object is
/// dropped after the table lock is released, since dropping can run user
/// release callbacks.
pub(crate) fn remove(h: u64, kind: Kind) -> Status {
    if h == 0 {
        return Status::Ok;
    }
    let d = decode(h);
    match Kind::from_u8(d.kind) {
        None => return Status::InvalidHandle,
        Some(k) if k != kind => {
            return match lookup(&d) {
                Ok(_) => Status::WrongHandleType,
                Err(Status::StaleHandle) => Status::DoubleFree,
                Err(s) => s,
            }
        }
        Some(_) => {}
    }
    let taken = {
        let mut s = table()[d.shard].write();
        let Some(slot) = s.slots.get_mut(d.slot) else {
            return Status::InvalidHandle;
        };
        if d.gen == 0 || d.gen > slot.gen || slot.obj.is_none() && d.gen == slot.gen {
            return Status::InvalidHandle;
        }
        if d.gen < slot.gen {
            return Status::DoubleFree;
        }
        let obj = slot.obj.take();
        slot.gen = if slot.gen as u64 == GEN_MASK { 1 } else { slot.gen + 1 };
        s.free.push(d.slot as u32);
        LIVE.fetch_sub(1, Ordering::Relaxed);
        obj
    };
    drop(taken);
    Status::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev() -> Object {
        Object::Event(Event::new())
    }

    /// A handle's object and its generation fill half a line of the table
    /// (two slots per line; (e) in the C benchmark: 216 bytes per live
    /// handle against a 256 target).
    #[test]
    fn an_object_stays_within_its_size_budget() {
        let size = std::mem::size_of::<Option<Object>>();
        assert!(size <= 24, "a handle's object is {size} bytes");
    }

    #[test]
    fn lifecycle_statuses() {
        let h = insert(ev()).unwrap();
        assert!(get(h, Kind::Event).is_ok());
        assert_eq!(get(h, Kind::Tensor).err(), Some(Status::WrongHandleType));
        assert_eq!(remove(h, Kind::Tensor), Status::WrongHandleType);
        assert_eq!(remove(h, Kind::Event), Status::Ok);
        assert_eq!(get(h, Kind::Event).err(), Some(Status::StaleHandle));
        assert_eq!(remove(h, Kind::Event), Status::DoubleFree);
        // The slot is reused with a new generation; the old handle stays stale.
        let h2 = insert(ev()).unwrap();
        assert_ne!(h, h2);
        assert_eq!(get(h, Kind::Event).err(), Some(Status::StaleHandle));
        assert_eq!(remove(h, Kind::Event), Status::DoubleFree);
        assert!(get(h2, Kind::Event).is_ok());
        assert_eq!(remove(h2, Kind::Event), Status::Ok);
    }

    /// A thread holding borrows can lock the same shard again while a
    /// writer of that shard waits (the writer then proceeds).
    #[test]
    fn borrows_are_recursive_under_a_waiting_writer() {
        let h1 = insert(ev()).unwrap();
        let h2 = insert(ev()).unwrap();
        assert_eq!(decode(h1).shard, decode(h2).shard, "one thread inserts into one shard");
        let mut first = Borrows::new();
        first.lock(h1);
        let writer = std::thread::spawn(move || remove(h2, Kind::Event));
        // Give the writer time to queue on the shard's lock.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!writer.is_finished(), "the writer waits for the borrow");
        let mut second = Borrows::new();
        second.lock(h1);
        assert!(matches!(second.get(h1, Kind::Event), Ok(Object::Event(_))));
        drop(second);
        drop(first);
        assert_eq!(writer.join().unwrap(), Status::Ok);
        let mut after = Borrows::new();
        after.lock(h2);
        assert_eq!(after.get(h2, Kind::Event).err(), Some(Status::StaleHandle));
        drop(after);
        assert_eq!(remove(h1, Kind::Event), Status::Ok);
    }

    /// One lock per shard serves every handle of the shard, with the same
    /// statuses as `get`; a writer of the shard waits until it is dropped.
    #[test]
    fn borrows_share_a_shards_lock_and_classify_like_get() {
        let h1 = insert(ev()).unwrap();
        let h2 = insert(ev()).unwrap();
        let gone = insert(ev()).unwrap();
        assert_eq!(remove(gone, Kind::Event), Status::Ok);
        let mut b = Borrows::new();
        for h in [h1, h2, gone, 0] {
            b.lock(h);
        }
        assert_eq!(b.guards.len(), 1, "one thread inserts into one shard");
        assert!(matches!(b.get(h1, Kind::Event), Ok(Object::Event(_))));
        assert!(matches!(b.get(h2, Kind::Event), Ok(Object::Event(_))));
        assert_eq!(b.get(gone, Kind::Event).err(), Some(Status::StaleHandle));
        assert_eq!(b.get(0, Kind::Event).err(), Some(Status::NullHandle));
        assert_eq!(b.get(h1, Kind::Tensor).err(), Some(Status::WrongHandleType));
        assert_eq!(b.get(0xdead_beef, Kind::Tensor).err(), Some(Status::InvalidHandle));
        let writer = std::thread::spawn(move || remove(h2, Kind::Event));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!writer.is_finished(), "the writer waits for the borrows");
        assert!(b.get(h2, Kind::Event).is_ok());
        drop(b);
        assert_eq!(writer.join().unwrap(), Status::Ok);
        assert_eq!(remove(h1, Kind::Event), Status::Ok);
    }

    /// A handle in another shard than `h`'s, made by another thread (each
    /// thread inserts into its own shard; threads that happen to share
    /// `h`'s are tried past).
    fn in_another_shard(h: u64) -> u64 {
        loop {
            let other = std::thread::spawn(|| insert(ev()).unwrap()).join().unwrap();
            if decode(other).shard != decode(h).shard {
                return other;
            }
            assert_eq!(remove(other, Kind::Event), Status::Ok);
        }
    }

    /// Handles made by two threads live in two shards: one `Borrows`
    /// locks both (the second one apart from the first) and finds each
    /// handle in its own, and holds a writer of either until it is dropped.
    #[test]
    fn borrows_lock_each_shard_once() {
        let mine = insert(ev()).unwrap();
        let theirs = in_another_shard(mine);
        let mut b = Borrows::new();
        for h in [mine, theirs, mine, theirs] {
            b.lock(h);
        }
        assert_eq!(b.guards.len(), 2);
        assert!(matches!(b.get(mine, Kind::Event), Ok(Object::Event(_))));
        assert!(matches!(b.get(theirs, Kind::Event), Ok(Object::Event(_))));
        assert_eq!(b.get(theirs, Kind::Tensor).err(), Some(Status::WrongHandleType));
        let writer = std::thread::spawn(move || remove(theirs, Kind::Event));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!writer.is_finished(), "the writer of the second shard waits for the borrows");
        drop(b);
        assert_eq!(writer.join().unwrap(), Status::Ok);
        assert_eq!(remove(mine, Kind::Event), Status::Ok);
    }

    /// A handle of a shard that was not locked is an internal error, not a
    /// lookup in an unlocked shard.
    #[test]
    fn borrows_refuse_a_handle_of_an_unlocked_shard() {
        let mine = insert(ev()).unwrap();
        let theirs = in_another_shard(mine);
        let mut b = Borrows::new();
        b.lock(mine);
        assert_eq!(b.get(theirs, Kind::Event).err(), Some(Status::Internal));
        drop(b);
        assert_eq!(remove(mine, Kind::Event), Status::Ok);
        assert_eq!(remove(theirs, Kind::Event), Status::Ok);
    }

    /// A reserved slot is nobody's until it is filled: a handle to it is
    /// not live, other inserts do not take it, and dropping it unfilled
    /// gives it back (the live count only counts filled slots).
    #[test]
    fn reserved_slots_are_filled_once_or_given_back() {
        let before = live();
        let r = reserve().unwrap();
        let (shard, slot) = (r.shard, r.slot);
        let other = insert(ev()).unwrap();
        assert_ne!((decode(other).shard, decode(other).slot), (shard, slot), "an insert took a reserved slot");
        let h = encode(Kind::Event, table()[shard].read().slots[slot].gen, shard, slot).unwrap();
        assert_eq!(get(h, Kind::Event).err(), Some(Status::InvalidHandle));
        assert_eq!(remove(h, Kind::Event), Status::InvalidHandle);
        let filled = r.fill(ev());
        assert_eq!(filled, h);
        assert!(get(h, Kind::Event).is_ok());
        assert_eq!(remove(h, Kind::Event), Status::Ok);
        let dropped = reserve().unwrap();
        let (shard, slot) = (dropped.shard, dropped.slot);
        drop(dropped);
        assert!(table()[shard].read().free.contains(&(slot as u32)), "an unfilled reservation's slot is free again");
        assert_eq!(remove(other, Kind::Event), Status::Ok);
        assert_eq!(live(), before);
    }

    #[test]
    fn null_and_forged() {
        assert_eq!(get(0, Kind::Tensor).err(), Some(Status::NullHandle));
        assert_eq!(remove(0, Kind::Tensor), Status::Ok);
        assert_eq!(get(0xdead_beef, Kind::Tensor).err(), Some(Status::InvalidHandle));
        assert_eq!(get(0x7f00_0000_0000_0001, Kind::Tensor).err(), Some(Status::InvalidHandle));
        let forged = (Kind::Tensor as u64) << 56 | (GEN_MASK << 32) | 0xffff_fff0;
        assert_eq!(get(forged, Kind::Tensor).err(), Some(Status::InvalidHandle));
        assert_eq!(remove(forged, Kind::Tensor), Status::InvalidHandle);
    }
}
