//! [`setters!`]: the one form of every builder method that sets one field.

/// Builder methods that each set one field and return the builder: each entry is the
/// method's docs, its name and argument, and the assignment it makes.
///
/// ```text
/// crate::builder::setters! {
///     /// The most connections the pool holds (default 16).
///     max_connections(max: usize) => options.max_connections = max;
/// }
/// ```
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty) => $($field:ident).+ = $value:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name(mut self, $arg: $ty) -> Self {
            self.$($field).+ = $value;
            self
        }
    )*};
}
pub(crate) use setters;
