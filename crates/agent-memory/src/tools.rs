//! Placeholder: model tools are being written.
