package tensorasync

//go:generate go run ./internal/gen
