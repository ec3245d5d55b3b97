// Package storetest is the conformance suite for checkpoint.Store: one set
// of tests that every backend must pass, so file:// and s3:// keep the same
// contract (round trip, SHA-256 verification, interrupted saves never
// latest, retention, isolation between jobs, concurrent saves, not-found
// and invalid-input errors, cancellation).
//
// A backend's test calls Run with a Fixture: a way to open stores over
// fresh storage, and raw access to that storage for the cases that damage
// it behind the store's back (a corrupted file, a manifest-less upload).
// The raw keys follow the layout that package checkpoint documents.
package storetest
