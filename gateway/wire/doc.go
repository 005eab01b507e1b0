// Package wire is the one Responses model the gateway's dialects translate to and from: the
// input items and tools a request sends (items.go), the events and output items the pool streams
// back (events.go), the hosted web search tool and what its answers carry beyond Item
// (websearch.go), and the rules every dialect applies alike — the tool-name shortener and its
// collision rule (names.go), call ids (ShortID), the clean-up of tool JSON Schemas the origin
// refuses (schema.go), unknown content types (Unsupported) and the calls tracker that finds a
// streamed function call by any of its aliases (calls.go).
//
// A dialect (gateway/chat, gateway/anthropic, the Responses route) is an adapter: its request
// becomes a wire request, the wire events become its own stream and final shape. Start with
// NewNames for a request's tools, then Tool and the item types for its body.
package wire
