//! Subprocess profiles (env minimization, process groups, timeouts, output caps) and the filesystem executor.
