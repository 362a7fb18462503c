//! Model providers: the scripted transcript and OpenAI-compatible chat completions.
