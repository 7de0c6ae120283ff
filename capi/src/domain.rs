//! The C encodings of domains and backend selections.

use ta::{BackendKind, Domain, Selector};

use crate::types::*;

/// The `ta_domain` of a domain: `TA_DOMAIN_HOST`, or N for CUDA device N.
pub(crate) fn to_c(d: Domain) -> ta_domain {
    match d {
        Domain::Host => TA_DOMAIN_HOST,
        Domain::Cuda(n) => n as ta_domain,
    }
}

/// The domain of a `ta_domain`; `None` for values below `TA_DOMAIN_HOST`.
pub(crate) fn from_c(v: ta_domain) -> Option<Domain> {
    match v {
        TA_DOMAIN_HOST => Some(Domain::Host),
        n if n >= 0 => Some(Domain::Cuda(n as u32)),
        _ => None,
    }
}

/// The selection of a `ta_submit.backends` bit set (bit `TA_BACKEND_x` for
/// each allowed family, 0 for any); `None` for an unknown bit. On every
/// submission's path: allocates nothing.
#[inline]
pub(crate) fn selector_from_c(mask: u32) -> Option<Selector> {
    const KINDS: [(ta_backend, BackendKind); 3] = [
        (TA_BACKEND_NATIVE, BackendKind::Native),
        (TA_BACKEND_BLAS, BackendKind::Blas),
        (TA_BACKEND_CUDA, BackendKind::Cuda),
    ];
    if mask == 0 {
        return Some(Selector::AUTO);
    }
    let known = KINDS.iter().fold(0, |m, (b, _)| m | 1 << b);
    if mask & !known != 0 {
        return None;
    }
    let mut kinds = [BackendKind::Native; KINDS.len()];
    let mut n = 0;
    for (b, k) in KINDS {
        if mask & 1 << b != 0 {
            kinds[n] = k;
            n += 1;
        }
    }
    Some(Selector::only(&kinds[..n]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_round_trip_and_reject_below_host() {
        for d in [Domain::Host, Domain::Cuda(0), Domain::Cuda(7)] {
            assert_eq!(from_c(to_c(d)), Some(d));
        }
        assert_eq!((to_c(Domain::Host), to_c(Domain::Cuda(3))), (-1, 3));
        assert_eq!(from_c(-2), None);
    }

    #[test]
    fn backend_bits_select_their_families() {
        assert_eq!(selector_from_c(0), Some(Selector::AUTO));
        assert_eq!(selector_from_c(1 << TA_BACKEND_BLAS), Some(Selector::only(&[BackendKind::Blas])));
        assert_eq!(
            selector_from_c(1 << TA_BACKEND_NATIVE | 1 << TA_BACKEND_CUDA),
            Some(Selector::only(&[BackendKind::Native, BackendKind::Cuda]))
        );
        assert_eq!(selector_from_c(1), None, "bit 0 is no backend");
        assert_eq!(selector_from_c(1 << 9), None);
    }
}
