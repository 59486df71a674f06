"""`kcontract review`'s pure parts: the ABBA schedule, the noise floor and verdicts, what changed, and the review
as markdown, text and JSON; the session (session/review.py) gathers what they judge."""
