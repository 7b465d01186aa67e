//! `text_enum!`: a closed vocabulary stored and shown as snake_case text (a status, a
//! kind). One definition gives the enum, its names, parsing with an error that lists
//! them, serde, and sqlx encoding as text on SQLite and PostgreSQL.

/// A text that is not one of a vocabulary's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// What the vocabulary is (`communication status`).
    pub what: &'static str,
    pub value: String,
    /// Every name, comma-separated.
    pub names: String,
}

impl std::fmt::Display for UnknownName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown {} {:?}: one of {}",
            self.what, self.value, self.names
        )
    }
}

impl std::error::Error for UnknownName {}

/// Defines a text vocabulary: `text_enum!("what it is", #[meta] pub enum Name { Variant = "name", … })`.
/// With the crate's `openapi` feature (the HTTP crate's build) the enum also derives
/// `utoipa::ToSchema`, in whichever crate the vocabulary is defined.
#[macro_export]
#[doc(hidden)]
macro_rules! __text_enum {
    // `$text` is a `tt`, not a `literal`: utoipa's derive does not see a `literal`
    // fragment in `#[serde(rename = …)]` (it arrives wrapped in an invisible group) and
    // would document the Rust variant names instead of the names on the wire.
    ($what:literal, $(#[$m:meta])* $vis:vis enum $name:ident { $($(#[$vm:meta])* $variant:ident = $text:tt),+ $(,)? }) => {
        $crate::__text_enum_schema! {
            $(#[$m])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
            $vis enum $name {
                $($(#[$vm])* #[serde(rename = $text)] $variant),+
            }
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// Every name, comma-separated (for error messages).
            pub fn names() -> String {
                Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::text_enum::UnknownName;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $crate::text_enum::UnknownName {
                        what: $what,
                        value: s.to_string(),
                        names: Self::names(),
                    })
            }
        }

        impl<DB: ::sqlx::Database> ::sqlx::Type<DB> for $name
        where
            String: ::sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <String as ::sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <String as ::sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'r, DB: ::sqlx::Database> ::sqlx::Decode<'r, DB> for $name
        where
            String: ::sqlx::Decode<'r, DB>,
        {
            fn decode(value: DB::ValueRef<'r>) -> Result<Self, ::sqlx::error::BoxDynError> {
                let text = <String as ::sqlx::Decode<'r, DB>>::decode(value)?;
                Ok(text.parse()?)
            }
        }

        impl<'q, DB: ::sqlx::Database> ::sqlx::Encode<'q, DB> for $name
        where
            &'static str: ::sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as ::sqlx::Database>::ArgumentBuffer,
            ) -> Result<::sqlx::encode::IsNull, ::sqlx::error::BoxDynError> {
                <&'static str as ::sqlx::Encode<'q, DB>>::encode(self.as_str(), buf)
            }
        }
    };
}
#[doc(inline)]
pub use crate::__text_enum as text_enum;

/// The enum item of [`text_enum!`], with the OpenAPI schema derive (feature `openapi`).
#[cfg(feature = "openapi")]
#[macro_export]
#[doc(hidden)]
macro_rules! __text_enum_schema {
    ($($item:tt)*) => {
        #[derive(::utoipa::ToSchema)]
        $($item)*
    };
}

/// The enum item of [`text_enum!`] (no OpenAPI schema without the feature `openapi`).
#[cfg(not(feature = "openapi"))]
#[macro_export]
#[doc(hidden)]
macro_rules! __text_enum_schema {
    ($($item:tt)*) => {
        $($item)*
    };
}
