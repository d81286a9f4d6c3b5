//! Tier gating: what a bot's quota tier lets it call. Free-tier bots may
//! not edit or delete (`Tier::may_edit_delete`, which the identity's
//! `capabilities.edit_delete_messages` reports); the check comes before the
//! body is read, so a free bot cannot probe message ids through edit or
//! delete.

use crate::error::{ApiError, ApiResult};
use crate::model::Tier;
use crate::route::BotMethod;

/// Whether `method` is gated by tier at all.
pub fn gated(method: BotMethod) -> bool {
    matches!(method, BotMethod::EditMessageText | BotMethod::EditMessageReplyMarkup | BotMethod::DeleteMessage)
}

/// The tier gate: `tier_forbidden` for a gated method the tier lacks.
pub fn check(tier: Tier, method: BotMethod) -> ApiResult<()> {
    if gated(method) && !tier.may_edit_delete() {
        return Err(ApiError::tier_forbidden(method.name()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_tier_may_not_edit_or_delete_others_may() {
        for m in [BotMethod::EditMessageText, BotMethod::EditMessageReplyMarkup, BotMethod::DeleteMessage] {
            let e = check(Tier::Free, m).unwrap_err();
            assert_eq!(e.code, "tier_forbidden");
            assert_eq!(e.description, format!("{} is not available to bots of the free tier", m.name()));
            assert!(check(Tier::Standard, m).is_ok());
            assert!(check(Tier::Official, m).is_ok());
        }
        for m in [BotMethod::SendMessage, BotMethod::SendChatAction, BotMethod::GetMe, BotMethod::GetUpdates] {
            assert!(check(Tier::Free, m).is_ok());
        }
        assert!(!Tier::Free.may_edit_delete());
        assert!(Tier::Standard.may_edit_delete() && Tier::Official.may_edit_delete());
    }
}
