package redisfast

// ClaimByScript decides a claim by the script alone, as Claim does when
// its read does not answer: the entry may have changed between the two,
// so the script must decide every entry itself.
var ClaimByScript = (*Layer).claimByScript
