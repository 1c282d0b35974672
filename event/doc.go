// Package event owns what an event is and how it is read: the decoder of the event schema
// (one JSON object, or NDJSON lines), its refusal reasons, and the encoder that writes it.
// Kafka records (ingest) and POST /v1/events (query) decode with it.
//
// Decoder is a hand-written parser, 0 allocations per event once its key and metric are
// interned, checked against encoding/json by a differential test and a fuzz target. Three
// paths (decode_fast.go): Append's exact layout read word by word, a member loop for the
// same members in any order, spaced, repeated or among other members (skipped by the
// scanner's own MemberName and SkipValue, in the same pass), to which the first hands its
// position, and the scanner path for the rest, the one source of refusals, which goes on
// from the last member the others read; FuzzDecodeFast holds the first two to the third.
// Names are interned in an open-addressing table (decode_intern.go) whose lookups are
// bounded under collisions.
package event
