//! Placeholder: prompt rendering is being written.
