-- One column per MySQL/TiDB type spelling that avro-registry-sink reads (golden tests).
-- Column names say the spelling; comments say what TiDB stores.
CREATE TABLE `golden`.`all_types` (
  `id` BIGINT NOT NULL PRIMARY KEY,
  -- integers
  `c_tinyint` TINYINT,
  `c_tinyint_u` TINYINT UNSIGNED,
  `c_int1` INT1,
  `c_bool` BOOL,                              -- TINYINT(1)
  `c_boolean` BOOLEAN,                        -- TINYINT(1)
  `c_smallint` SMALLINT,
  `c_smallint_u` SMALLINT UNSIGNED,
  `c_int2` INT2,
  `c_mediumint` MEDIUMINT,
  `c_mediumint_u` MEDIUMINT UNSIGNED,
  `c_middleint` MIDDLEINT,
  `c_int3` INT3,
  `c_int` INT,
  `c_int_11` INT(11),                         -- deprecated display width
  `c_int_u` INT UNSIGNED,
  `c_int_zerofill` INT(10) ZEROFILL,          -- ZEROFILL implies UNSIGNED
  `c_int_signed` INT SIGNED,
  `c_integer` INTEGER,
  `c_int4` INT4,
  `c_bigint` BIGINT,
  `c_bigint_u` BIGINT UNSIGNED,
  `c_int8` INT8,                              -- BIGINT
  `c_serial` SERIAL,                          -- BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE
  -- floating and fixed point
  `c_float` FLOAT,
  `c_float_u` FLOAT UNSIGNED,
  `c_float4` FLOAT4,
  `c_float_p24` FLOAT(24),                    -- FLOAT
  `c_float_p25` FLOAT(25),                    -- DOUBLE
  `c_float_m_d` FLOAT(7,3),
  `c_double` DOUBLE,
  `c_double_m_d` DOUBLE(10,2),
  `c_double_precision` DOUBLE PRECISION,
  `c_real` REAL,                              -- DOUBLE
  `c_float8` FLOAT8,                          -- DOUBLE
  `c_decimal` DECIMAL,                        -- DECIMAL(10,0)
  `c_decimal_m` DECIMAL(5),                   -- DECIMAL(5,0)
  `c_decimal_m_d` DECIMAL(20,6),
  `c_decimal_u` DECIMAL(10,2) UNSIGNED,
  `c_numeric` NUMERIC(8,3),
  `c_dec` DEC(6,1),
  `c_fixed` FIXED(4,2),
  -- bits
  `c_bit` BIT,
  `c_bit_10` BIT(10),
  `c_bit_64` BIT(64),
  -- character strings
  `c_char` CHAR,
  `c_char_10` CHAR(10),
  `c_character` CHARACTER(4),
  `c_nchar` NCHAR(4),
  `c_national_char` NATIONAL CHAR(4),
  `c_national_character` NATIONAL CHARACTER(4),
  `c_varchar` VARCHAR(255),
  `c_varcharacter` VARCHARACTER(16),
  `c_nvarchar` NVARCHAR(16),
  `c_char_varying` CHAR VARYING(16),
  `c_character_varying` CHARACTER VARYING(16),
  `c_national_varchar` NATIONAL VARCHAR(16),
  `c_nchar_varchar` NCHAR VARCHAR(16),
  `c_nchar_varying` NCHAR VARYING(16),
  `c_national_char_varying` NATIONAL CHAR VARYING(16),
  `c_national_character_varying` NATIONAL CHARACTER VARYING(16),
  `c_varchar_bin` VARCHAR(16) BINARY,         -- utf8mb4_bin collation: still text
  `c_varchar_collate` VARCHAR(16) COLLATE utf8mb4_bin,
  `c_varchar_latin1` VARCHAR(16) CHARACTER SET latin1,
  `c_tinytext` TINYTEXT,
  `c_text` TEXT,
  `c_text_100` TEXT(100),
  `c_mediumtext` MEDIUMTEXT,
  `c_long` LONG,                              -- MEDIUMTEXT
  `c_long_varchar` LONG VARCHAR,              -- MEDIUMTEXT
  `c_long_char_varying` LONG CHAR VARYING,    -- MEDIUMTEXT
  `c_longtext` LONGTEXT,
  -- binary strings (charset binary)
  `c_binary` BINARY,
  `c_binary_16` BINARY(16),
  `c_char_byte` CHAR BYTE,                    -- BINARY
  `c_char_charset_binary` CHAR(8) CHARACTER SET binary,       -- BINARY(8)
  `c_varbinary` VARBINARY(64),
  `c_varchar_charset_binary` VARCHAR(64) CHARSET binary,      -- VARBINARY(64)
  `c_tinyblob` TINYBLOB,
  `c_tinytext_binary` TINYTEXT CHARACTER SET binary,          -- TINYBLOB
  `c_blob` BLOB,
  `c_blob_20` BLOB(20),
  `c_text_binary` TEXT CHARACTER SET binary,                  -- BLOB
  `c_mediumblob` MEDIUMBLOB,
  `c_long_varbinary` LONG VARBINARY,          -- MEDIUMBLOB
  `c_longblob` LONGBLOB,
  -- ENUM / SET
  `c_enum` ENUM('a','b','it''s','x\,y'),
  `c_set` SET('red','green','blue'),
  -- JSON, temporal, YEAR, VECTOR
  `c_json` JSON,
  `c_date` DATE,
  `c_datetime` DATETIME,
  `c_datetime_3` DATETIME(3),
  `c_timestamp` TIMESTAMP NULL,
  `c_timestamp_6` TIMESTAMP(6) NULL,
  `c_time` TIME,
  `c_time_2` TIME(2),
  `c_year` YEAR,
  `c_year_4` YEAR(4),
  `c_vector` VECTOR,
  `c_vector_3` VECTOR(3),
  `c_vector_float_3` VECTOR<FLOAT>(3)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
